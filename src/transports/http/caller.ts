import { createHmac } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { validateOwnerId } from '../../core/admission/owner.js';
import type { Caller } from '../../core/sandboxes/caller.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth plugin when an admin credential was presented. */
    sbxAdmin?: boolean;
  }
  interface FastifyInstance {
    /** Per-installation secret the derived-owner digests are keyed with; never shown. */
    sbxDerivedOwnerKey: Buffer;
  }
}

/** Gives an app (and every route context under it) the secret its derived owners are keyed with. */
export function setDerivedOwnerKey(app: FastifyInstance, key: Buffer): void {
  app.decorate('sbxDerivedOwnerKey', key);
}

/**
 * The caller's owner (spec 5.1 rule 7): X-User-ID (validated for every /api/v1 route by the auth
 * plugin), else the body's owner_id, else one derived from X-API-Key, else from the client address.
 */
export function callerOf(request: FastifyRequest, bodyOwner?: string | null): Caller {
  const explicit = request.sbxUserId ?? validateOwnerId(bodyOwner ?? null);
  return { owner_id: explicit ?? derivedOwner(request), admin: request.sbxAdmin === true };
}

/**
 * `key/<digest>` or `ip/<digest>`, so a key or an address never lands in a sandbox record or an
 * event. The digest is an HMAC under a per-installation secret: sandbox responses and events show
 * derived owners, and a plain hash of a weak API key could be reversed offline by guessing.
 */
function derivedOwner(request: FastifyRequest): string {
  const secret = request.server.sbxDerivedOwnerKey;
  const mac = (s: string) => createHmac('sha256', secret).update(s).digest('hex').slice(0, 16);
  const key = request.headers['x-api-key'];
  const apiKey = (Array.isArray(key) ? key[0] : key)?.trim();
  return apiKey ? `key/${mac(`api_key:${apiKey}`)}` : `ip/${mac(`ip:${request.ip}`)}`;
}
