import type { FastifyInstance } from 'fastify';
import type { HttpDeps } from '../deps.js';
import { sendError } from '../errors.js';

export const CORS_ALLOW_METHODS = 'GET, POST, PUT, PATCH, DELETE, OPTIONS';
/**
 * Every request header a browser client may send: the credentials of spec Part 5 (user, admin and
 * worker, including `Authorization: Bearer`), attribution, correlation and SSE replay. This is the
 * one list; a header the API reads but that is missing here fails every cross-origin preflight.
 */
export const CORS_ALLOW_HEADERS = [
  'Content-Type',
  'Authorization',
  'X-API-Key',
  'X-Admin-API-Key',
  'X-User-ID',
  'X-Worker-ID',
  'X-Worker-Token',
  'X-Request-ID',
  'Last-Event-ID',
].join(', ');
export const CORS_EXPOSE_HEADERS =
  'X-Request-ID, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, ' +
  'Content-Disposition, X-Log-Cursor, Link, Idempotent-Replayed';
/** Seconds a browser may cache a preflight answer. */
export const CORS_MAX_AGE_S = 600;

/**
 * CORS (spec 5.1 rule 5): `server.cors_allowed_origins`, '*' = any origin. Registered before auth so
 * preflights (which carry no credentials) are answered first; OPTIONS never reaches the router, so
 * it is never a 404/405. A refused origin gets no Access-Control-Allow-Origin; its preflight a 403.
 */
export function corsPlugin(app: FastifyInstance, deps: HttpDeps): void {
  const origins = deps.corsAllowedOrigins;
  const wildcard = origins.includes('*');
  // Origins compare case-insensitively (scheme and host are); the request's spelling is echoed.
  const allowed = new Set(origins.map((o) => o.replace(/\/+$/, '').toLowerCase()));

  app.addHook('onRequest', async (request, reply) => {
    const raw = request.headers.origin;
    const origin = Array.isArray(raw) ? raw[0] : raw;
    if (!wildcard) reply.header('Vary', 'Origin');
    const ok = origin !== undefined && (wildcard || allowed.has(origin.toLowerCase()));
    if (ok) {
      reply.header('Access-Control-Allow-Origin', wildcard ? '*' : origin);
      reply.header('Access-Control-Expose-Headers', CORS_EXPOSE_HEADERS);
    }
    if (request.method !== 'OPTIONS') return;
    if (origin !== undefined && !ok) {
      return sendError(reply, 403, 'forbidden', 'origin is not allowed by server.cors_allowed_origins');
    }
    reply.header('Access-Control-Allow-Methods', CORS_ALLOW_METHODS);
    reply.header('Access-Control-Allow-Headers', CORS_ALLOW_HEADERS);
    reply.header('Access-Control-Max-Age', String(CORS_MAX_AGE_S));
    return reply.code(204).send();
  });
}
