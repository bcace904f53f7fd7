import { badRequest } from '../errors.js';

/** Longest file name the file systems under sandboxes take (NAME_MAX). */
export const MAX_NAME_BYTES = 255;
/** Longest normalized path, in bytes: PATH_MAX less its terminating NUL. */
export const MAX_PATH_BYTES = 4095;
/** Deepest path accepted; far beyond real trees, and it bounds what one path costs a provider. */
export const MAX_PATH_DEPTH = 256;

const encoder = new TextEncoder();
const byteLength = (s: string): number => encoder.encode(s).length;

/**
 * Validates and normalizes a path inside a sandbox: absolute, no NUL, `.` and empty segments
 * folded, and no `..` that would climb above the root (rejected, not clamped, so a caller that
 * tries to escape learns it). Names over NAME_MAX, paths over PATH_MAX and very deep paths are
 * refused here, before any provider sees them.
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
    if (byteLength(seg) > MAX_NAME_BYTES) throw badRequest(`${field} has a component longer than ${MAX_NAME_BYTES} bytes`);
    out.push(seg);
  }
  if (out.length > MAX_PATH_DEPTH) throw badRequest(`${field} is deeper than ${MAX_PATH_DEPTH} levels`);
  const normalized = '/' + out.join('/');
  if (byteLength(normalized) > MAX_PATH_BYTES) throw badRequest(`${field} is longer than ${MAX_PATH_BYTES} bytes`);
  return normalized;
}

const GLOB_META = /[*?[\\]/;

/**
 * Validates a glob pattern: absolute like a path; `..` segments are not allowed at all. A literal
 * segment (no glob syntax) is a file name, so it has the same length limit.
 */
export function sandboxGlob(input: unknown): string {
  if (typeof input !== 'string' || input.length === 0) throw badRequest('pattern is required');
  if (input.includes('\0')) throw badRequest('pattern must not contain NUL bytes');
  if (!input.startsWith('/')) throw badRequest(`pattern must be absolute (start with /): ${JSON.stringify(input)}`);
  if (input.length > 4096) throw badRequest('pattern is longer than 4096 characters');
  const segs = input.split('/');
  if (segs.includes('..')) throw badRequest('pattern must not contain ".." segments');
  if (segs.filter((s) => s !== '').length > MAX_PATH_DEPTH) throw badRequest(`pattern is deeper than ${MAX_PATH_DEPTH} levels`);
  if (segs.some((s) => !GLOB_META.test(s) && byteLength(s) > MAX_NAME_BYTES)) {
    throw badRequest(`pattern has a component longer than ${MAX_NAME_BYTES} bytes`);
  }
  return input.replace(/\/{2,}/g, '/');
}

/** Parses an octal mode string (`755`, `0644`, `01777`). */
export function parseOctalMode(input: unknown, field = 'mode'): number {
  if (typeof input !== 'string' || !/^0?[0-7]{1,4}$/.test(input)) {
    throw badRequest(`${field} must be an octal string such as 644 or 0755, got ${JSON.stringify(input)}`);
  }
  return parseInt(input, 8);
}
