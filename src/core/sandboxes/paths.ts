import { badRequest } from '../errors.js';

/**
 * Validates and normalizes a path inside a sandbox: absolute, no NUL, `.` and empty segments
 * folded, and no `..` that would climb above the root (rejected, not clamped, so a caller that
 * tries to escape learns it).
 */
export function sandboxPath(input: unknown, field = 'path'): string {
  if (typeof input !== 'string' || input.length === 0) throw badRequest(`${field} is required`);
  if (input.includes('\0')) throw badRequest(`${field} must not contain NUL bytes`);
  if (!input.startsWith('/')) throw badRequest(`${field} must be absolute (start with /): ${JSON.stringify(input)}`);
  if (input.length > 4096) throw badRequest(`${field} is longer than 4096 characters`);
  const out: string[] = [];
  for (const seg of input.split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') {
      if (out.length === 0) throw badRequest(`${field} escapes the sandbox root: ${JSON.stringify(input)}`);
      out.pop();
      continue;
    }
    out.push(seg);
  }
  return '/' + out.join('/');
}

/** Validates a glob pattern: absolute like a path; `..` segments are not allowed at all. */
export function sandboxGlob(input: unknown): string {
  if (typeof input !== 'string' || input.length === 0) throw badRequest('pattern is required');
  if (input.includes('\0')) throw badRequest('pattern must not contain NUL bytes');
  if (!input.startsWith('/')) throw badRequest(`pattern must be absolute (start with /): ${JSON.stringify(input)}`);
  if (input.split('/').includes('..')) throw badRequest('pattern must not contain ".." segments');
  return input.replace(/\/{2,}/g, '/');
}

/** Parses an octal mode string (`755`, `0644`, `01777`). */
export function parseOctalMode(input: unknown, field = 'mode'): number {
  if (typeof input !== 'string' || !/^0?[0-7]{1,4}$/.test(input)) {
    throw badRequest(`${field} must be an octal string such as 644 or 0755, got ${JSON.stringify(input)}`);
  }
  return parseInt(input, 8);
}
