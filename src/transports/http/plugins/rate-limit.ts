import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { RateLimiter, type RateLimitKeyBy } from '../../../core/admission/rate-limiter.js';
import type { HttpDeps } from '../deps.js';
import { sendError } from '../errors.js';

/** Probes must answer even under a flood; worker traffic is machine-to-machine with its own credentials. */
const EXEMPT = new Set(['/api/v1/health', '/api/v1/live', '/api/v1/ready']);
const EXEMPT_PREFIX = '/api/v1/worker/';

function header(request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name];
  const s = (Array.isArray(v) ? v[0] : v)?.trim();
  return s ? s : undefined;
}

/**
 * The bucket key for a request (spec 5.1 rule 7, spec 8): `owner` = X-User-ID, then X-API-Key,
 * then client IP; `api_key` = X-API-Key, then IP; `ip` = IP. X-User-ID is the value the auth
 * plugin validated and trimmed, so ` alice` and `alice` share a bucket. Returned as a sha256
 * digest, so raw owner ids, keys and addresses never reach the limiter's memory or its stats.
 */
export function rateLimitKey(request: FastifyRequest, keyBy: RateLimitKeyBy): string {
  const user = keyBy === 'owner' ? (request.sbxUserId ?? undefined) : undefined;
  const apiKey = keyBy !== 'ip' ? header(request, 'x-api-key') : undefined;
  const identity = user !== undefined ? `owner:${user}` : apiKey !== undefined ? `api_key:${apiKey}` : `ip:${request.ip}`;
  return createHash('sha256').update(identity).digest('hex');
}

/** True for paths the limiter never touches. */
export function rateLimitExempt(request: FastifyRequest): boolean {
  if (request.method === 'OPTIONS') return true;
  const path = request.url.split('?')[0] ?? '/';
  const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
  if (!trimmed.startsWith('/api/') && !trimmed.startsWith('/e2b/')) return true;
  return EXEMPT.has(trimmed) || trimmed.startsWith(EXEMPT_PREFIX);
}

/**
 * API rate limiting (spec 7 rule 1, spec 8): an onRequest hook, registered after auth so a request
 * with a bad key is refused before it costs a token. Off unless `rate_limit.enabled`.
 */
export function rateLimitPlugin(app: FastifyInstance, deps: HttpDeps): void {
  const limiter = deps.rateLimiter;
  if (!(limiter instanceof RateLimiter) || !limiter.enabled) return;
  limiter.start();
  app.addHook('onClose', async () => limiter.stop());
  app.addHook('onRequest', async (request, reply) => {
    if (rateLimitExempt(request)) return;
    const d = limiter.take(rateLimitKey(request, limiter.settings.key_by));
    reply.header('X-RateLimit-Limit', String(d.limit));
    reply.header('X-RateLimit-Remaining', String(d.remaining));
    if (d.allowed) return;
    reply.header('Retry-After', String(d.retry_after_s));
    // One event when a client starts being refused, not one per refused request (a flood would
    // push everything else out of the event history). No identity: the key is hashed for a reason.
    if (d.first_denial) {
      deps.bus.publish({
        type: 'resource.limit',
        data: { reason: 'rate_limit', key_by: limiter.settings.key_by, retry_after: d.retry_after_s },
      });
    }
    sendError(reply, 429, 'resource_limit', `rate limit exceeded; retry in ${d.retry_after_s}s`, {
      reason: 'rate_limit',
      retry_after: d.retry_after_s,
    });
    return reply;
  });
}
