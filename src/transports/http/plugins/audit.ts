import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { realmOf } from '../realm.js';
import type { Clock, Store } from '../../../core/ports/index.js';
import type { HttpDeps } from '../deps.js';

export const AUDIT_EVERY_MS = 60 * 60_000;
const MAX_FIELD = 512;

/**
 * Quota saves and deletes through the compatibility paths (spec 4.4: "Both are recorded in the
 * audit history"), audited by the same rule as their admin aliases.
 */
const AUDITED_USER_ROUTES = new Set([
  'PUT /api/v1/quotas/:ownerID',
  'DELETE /api/v1/quotas/:ownerID',
  // Secrets (DESIGN.md §15): the path names the secret, never its value (bodies are not recorded).
  'POST /api/v1/secrets',
  'PUT /api/v1/secrets/:name',
  'DELETE /api/v1/secrets/:name',
]);

const clip = (s: string) => (s.length > MAX_FIELD ? s.slice(0, MAX_FIELD) : s);

/**
 * Audit history (DESIGN.md §3): every request to `/api/v1/admin/…` and every quota save or delete
 * on `/api/v1/quotas/…`, allowed or refused (401, 400, 404 alike), is recorded with actor
 * (credential kind, never its value), method, path (no query), status, duration, request id,
 * remote address and user agent. This hook is the only writer of audit rows. It runs as the
 * response is sent, not after: a client that has its answer can rely on the record existing.
 */
export function auditPlugin(app: FastifyInstance, deps: HttpDeps): void {
  app.addHook('onSend', async (request, reply) => {
    if (request.method === 'OPTIONS') return; // CORS preflights carry no credentials and do nothing
    const path = request.url.split('?')[0] ?? '/';
    const route = request.routeOptions.url;
    const audited = realmOf(route ?? path) === 'admin' || (route !== undefined && AUDITED_USER_ROUTES.has(`${request.method} ${route}`));
    if (!audited) return;
    const ua = request.headers['user-agent'];
    try {
      await deps.audit.record({
        id: randomUUID(),
        created_at: deps.clock.now().toISOString(),
        actor: request.sbxActor,
        method: request.method,
        path: clip(path),
        status: reply.statusCode,
        duration_ms: Math.round(reply.elapsedTime),
        request_id: String(request.id),
        remote_addr: request.ip ?? '',
        user_agent: clip((Array.isArray(ua) ? ua[0] : ua) ?? ''),
      });
    } catch (err) {
      // The change is already made; a store hiccup must not turn its answer into an error.
      request.log.warn({ err: String(err) }, 'admin audit insert failed');
    }
  });
}

/** Deletes audit records older than the retention; 0 = keep forever. Returns how many. */
export async function pruneAudit(store: Pick<Store, 'pruneAudit'>, clock: Clock, retentionMs: number): Promise<number> {
  if (retentionMs <= 0) return 0;
  return store.pruneAudit(new Date(clock.now().getTime() - retentionMs));
}

/**
 * Prunes once now and then hourly (`auth.admin_audit_retention`). Returns the unref'd timer for
 * the caller to clear on close, or null when retention is off.
 */
export function startAuditPruner(
  store: Pick<Store, 'pruneAudit'>,
  clock: Clock,
  retentionMs: number,
  onError: (err: unknown) => void = () => undefined,
): NodeJS.Timeout | null {
  if (retentionMs <= 0) return null;
  const run = () => void pruneAudit(store, clock, retentionMs).catch(onError);
  run();
  const timer = setInterval(run, AUDIT_EVERY_MS);
  timer.unref();
  return timer;
}
