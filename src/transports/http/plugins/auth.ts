import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { validateOwnerId } from '../../../core/admission/owner.js';
import { realmOf } from '../realm.js';
import { effectiveAdminKey } from '../../../core/auth/settings.js';
import { AUD_CONTROL_PLANE, type WorkerIdentity } from '../../../core/auth/worker-claims.js';
import { SbxError } from '../../../core/errors.js';
import type { HttpDeps } from '../deps.js';
import { authenticateWorker, safeEqual } from '../../shared/worker-auth.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** Who the credential says the caller is, for the audit: `admin-key`, `api-key` or `anonymous` (+ `:<X-User-ID>`). Never a key. */
    sbxActor: string;
    /** Set on worker routes once the worker credential is verified. */
    sbxWorker: WorkerIdentity | null;
    /** The X-User-ID header, validated and trimmed (spec 5.1 rule 1); null when absent or blank. */
    sbxUserId: string | null;
  }
}

/** The route table lives in ../route-table.ts; re-exported for the auth matrix. */
export { routeTable, type RouteEntry } from '../route-table.js';

const unauthorized = (message: string) => new SbxError('unauthorized', message);

function headerOf(request: FastifyRequest, name: string): string {
  const v = request.headers[name];
  return (Array.isArray(v) ? v[0] : v)?.trim() ?? '';
}

/**
 * Authentication (spec Part 5, DESIGN.md §3 "Auth"), one onRequest hook for every route:
 * - on every /api/v1 path a present X-User-ID is validated first (400 when malformed, spec 5.1
 *   rule 1 is a header rule, not a per-route one) and kept as `request.sbxUserId` for the
 *   caller's owner, the actor and the rate-limit key; CORS preflights were answered before;
 * - probes (`/live`, `/ready`) and paths outside /api/v1 are open;
 * - `/api/v1/worker/…` takes worker credentials only, whatever `auth.enabled` says; the worker ID
 *   must equal the `:workerID` path segment (403 otherwise);
 * - `/api/v1/admin/…` needs the admin key (X-Admin-API-Key, or X-API-Key equal to it); with no
 *   admin key it falls back to `auth.api_key` (auth on, fallback allowed). A valid user key alone
 *   → 403. With auth off and no admin key at all, admin routes are open (single-user dev box);
 * - other /api/v1 routes need X-API-Key (or an admin credential) when `auth.enabled`.
 * `request.sbxAdmin` is set on normal routes only by an explicit admin credential (X-Admin-API-Key,
 * or X-API-Key equal to a separate admin key), so with one shared key ownership still applies.
 * Any presented key that is wrong is a 401, never silently ignored.
 */
export function authPlugin(app: FastifyInstance, deps: HttpDeps): void {
  const auth = deps.auth;
  const adminKey = effectiveAdminKey(auth);
  app.decorateRequest('sbxAdmin', false);
  app.decorateRequest('sbxActor', 'anonymous');
  app.decorateRequest('sbxWorker', null);
  app.decorateRequest('sbxUserId', null);

  app.addHook('onRequest', async (request) => {
    const path = request.routeOptions.url ?? request.url.split('?')[0] ?? '/';
    const realm = realmOf(path);
    // The replica RPC checks its own `replica:rpc` token before it reads anything (DESIGN §7).
    // E2B's envd plane checks the sandbox's envd access token itself, per call (DESIGN §14).
    if (realm === 'outside' || realm === 'rpc' || realm === 'envd') return;
    request.sbxUserId = validateOwnerId(headerText(request.headers['x-user-id']), 'X-User-ID');
    if (realm === 'probe') return;

    if (realm === 'worker') {
      const identity = authenticateWorker(request.headers, auth.worker, AUD_CONTROL_PLANE, deps.clock.now());
      request.sbxWorker = identity;
      request.sbxActor = `worker:${identity.worker_id}`;
      const pathWorker = (request.params as { workerID?: string } | undefined)?.workerID;
      if (pathWorker !== undefined && pathWorker !== identity.worker_id) {
        throw new SbxError('forbidden', 'the authenticated worker may act only for itself (X-Worker-ID differs from the path worker ID)');
      }
      return;
    }

    const suffix = request.sbxUserId ? `:${request.sbxUserId}` : '';
    if (!auth.enabled && adminKey === '') {
      // Nothing to check: a single-user dev box. Everyone administers it.
      request.sbxAdmin = realm === 'admin';
      request.sbxActor = `anonymous${suffix}`;
      return;
    }

    const givenAdmin = headerOf(request, 'x-admin-api-key');
    const givenApi = headerOf(request, 'x-api-key') || webSocketKey(request);
    const adminViaHeader = givenAdmin !== '' && safeEqual(givenAdmin, adminKey);
    const apiIsAdmin = givenApi !== '' && safeEqual(givenApi, adminKey);
    const apiIsUser = auth.enabled && givenApi !== '' && safeEqual(givenApi, auth.api_key);
    const separateAdminKey = auth.admin_api_key !== '' && apiIsAdmin;
    const actor = adminViaHeader || (realm === 'admin' ? apiIsAdmin : separateAdminKey) ? 'admin-key' : apiIsUser ? 'api-key' : 'anonymous';
    request.sbxActor = `${actor}${suffix}`;

    if (givenAdmin !== '' && !adminViaHeader) throw unauthorized('invalid X-Admin-API-Key');
    if (givenApi !== '' && auth.enabled && !apiIsUser && !apiIsAdmin) throw unauthorized('invalid X-API-Key');

    if (realm === 'admin') {
      if (adminViaHeader || apiIsAdmin) {
        request.sbxAdmin = true;
        return;
      }
      if (apiIsUser) throw new SbxError('forbidden', 'admin routes need the admin API key (X-Admin-API-Key)');
      throw unauthorized(givenApi !== '' ? 'invalid X-API-Key' : 'admin routes need X-Admin-API-Key');
    }

    if (auth.enabled && !apiIsUser && !adminViaHeader && !apiIsAdmin) throw unauthorized('missing X-API-Key');
    request.sbxAdmin = adminViaHeader || separateAdminKey;
  });
}

/**
 * A browser cannot set headers on a WebSocket, so the dashboard's terminal offers its API key as a
 * subprotocol, `sbx.key.<unpadded base64url of the key>`, after a first `sbx.v1` (the one the server
 * selects and echoes, so the key is never sent back). Only on upgrade requests, never from a URL.
 */
const KEY_PROTOCOL = 'sbx.key.';
function webSocketKey(request: FastifyRequest): string {
  if (request.headers.upgrade?.toLowerCase() !== 'websocket') return '';
  const offered = headerOf(request, 'sec-websocket-protocol');
  for (const p of offered.split(',')) {
    const t = p.trim();
    if (t.startsWith(KEY_PROTOCOL)) return Buffer.from(t.slice(KEY_PROTOCOL.length), 'base64url').toString('utf8').trim();
  }
  return '';
}

/**
 * Node hands header values over as Latin-1; a client sending a UTF-8 owner id (`ü` as C3 BC)
 * means the characters those bytes spell, as it would in the JSON body's `owner_id`.
 */
function headerText(value: string | string[] | undefined): string | string[] | undefined {
  if (typeof value !== 'string' || isAscii(value)) return value;
  const bytes = Buffer.from(value, 'latin1');
  return isUtf8(bytes) ? bytes.toString('utf8') : value;
}

function isAscii(value: string): boolean {
  for (let i = 0; i < value.length; i++) if (value.charCodeAt(i) > 0x7f) return false;
  return true;
}
