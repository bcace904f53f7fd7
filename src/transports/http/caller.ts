import type { FastifyRequest } from 'fastify';
import { validateOwnerId } from '../../core/admission/owner.js';
import type { Caller } from '../../core/sandboxes/caller.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth plugin when an admin credential was presented. */
    sbxAdmin?: boolean;
  }
}

/** X-User-ID (validated, 400 when malformed) else the body's owner_id. */
export function callerOf(request: FastifyRequest, bodyOwner?: string | null): Caller {
  const header = request.headers['x-user-id'];
  const fromHeader = validateOwnerId(Array.isArray(header) ? header[0] : header, 'X-User-ID');
  const owner = fromHeader ?? validateOwnerId(bodyOwner ?? null);
  return { owner_id: owner, admin: request.sbxAdmin === true };
}
