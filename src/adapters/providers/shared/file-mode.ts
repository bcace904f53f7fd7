import { badRequest } from '../../../core/errors.js';

/** Octal permission + special bits with a leading zero: 0o644 → `0644`, 0o1777 → `01777`. */
export function formatMode(mode: number): string {
  return '0' + (mode & 0o7777).toString(8).padStart(3, '0');
}

/** Parses an octal mode string (`755`, `0755`, `01777`); anything else is a bad_request. */
export function parseMode(input: string): number {
  if (!/^0?[0-7]{1,4}$/.test(input)) {
    throw badRequest(`mode must be an octal string such as 644 or 0755, got ${JSON.stringify(input)}`);
  }
  return parseInt(input, 8);
}
