import { badRequest } from '../errors.js';

/**
 * Owner / X-User-ID rule (spec 2.6, 5.1 rule 1, 8): trimmed, at most 128 characters, no whitespace,
 * control characters or path separators. Returns the trimmed id, null for empty/absent.
 */
export function validateOwnerId(input: unknown, field = 'owner_id'): string | null {
  if (input === undefined || input === null) return null;
  if (typeof input !== 'string') throw badRequest(`${field} must be a string`);
  const id = input.trim();
  if (id === '') return null;
  if (id.length > 128) throw badRequest(`${field} must be at most 128 characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\s\u0000-\u001f\u007f/\\]/.test(id)) {
    throw badRequest(`${field} must not contain whitespace, control characters or path separators`);
  }
  return id;
}
