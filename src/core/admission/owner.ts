import { badRequest } from '../errors.js';

/**
 * Characters an owner id may not hold: Unicode whitespace (including U+00A0, U+2028, U+2029),
 * C0 and C1 controls (U+0085 is a line break to some log readers), invisible format characters
 * (zero-width, bidi overrides: an id must look like what it is), lone surrogates (no store can
 * keep them), and path separators (owner ids appear in URL paths).
 */
const FORBIDDEN = /[\p{White_Space}\p{Cc}\p{Cf}\p{Cs}/\\]/u;

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
  const bad = FORBIDDEN.exec(id);
  if (bad) {
    const cp = bad[0].codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0');
    throw badRequest(`${field} must not contain whitespace, control or invisible characters or path separators (found U+${cp})`);
  }
  return id;
}

/**
 * Owners derived from the credential or the client address when no owner id was given (spec 5.1
 * rule 7: X-User-ID, then X-API-Key, then client IP): `key/<digest>` and `ip/<digest>`. The `/`
 * cannot appear in an explicit owner id, so the two never collide; ownership checks treat derived
 * owners as unowned (only an explicit owner makes a sandbox private), while quotas count them.
 */
export function isDerivedOwner(id: string | null | undefined): boolean {
  return typeof id === 'string' && (id.startsWith('key/') || id.startsWith('ip/'));
}

/** An explicit owner id (validated) or a derived one as built at the edge. */
export function ownerForQuota(input: unknown): string | null {
  return isDerivedOwner(input as string) ? (input as string) : validateOwnerId(input);
}

/** True when `owner` makes a sandbox or event private to that owner (explicit owners only). */
export function isPrivateOwner(owner: string | null | undefined): owner is string {
  return typeof owner === 'string' && owner !== '' && !isDerivedOwner(owner);
}
