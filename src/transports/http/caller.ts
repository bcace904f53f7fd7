import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';
import { validateOwnerId } from '../../core/admission/owner.js';
import type { Caller } from '../../core/sandboxes/caller.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth plugin when an admin credential was presented. */
    sbxAdmin?: boolean;
  }
}

const digest = (s: string) => createHash('sha256').update(s).digest('hex').slice(0, 16);

/**
 * The caller's owner (spec 5.1 rule 7): X-User-ID (validated, 400 when malformed), else the body's
 * owner_id, else one derived from X-API-Key, else from the client address. Derived owners are
 * digests (`key/…`, `ip/…`): a key or an address never lands in a sandbox record or an event.
 */
export function callerOf(request: FastifyRequest, bodyOwner?: string | null): Caller {
  const header = request.headers['x-user-id'];
  const explicit = validateOwnerId(Array.isArray(header) ? header[0] : header, 'X-User-ID') ?? validateOwnerId(bodyOwner ?? null);
  return { owner_id: explicit ?? derivedOwner(request), admin: request.sbxAdmin === true };
}

function derivedOwner(request: FastifyRequest): string {
  const key = request.headers['x-api-key'];
  const apiKey = (Array.isArray(key) ? key[0] : key)?.trim();
  return apiKey ? `key/${digest(`api_key:${apiKey}`)}` : `ip/${digest(`ip:${request.ip}`)}`;
}
