import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routeTable, type RouteEntry } from '../../src/transports/http/plugins/auth.js';
import { REALM_PREFIXES, realmOf } from '../../src/transports/http/realm.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openWs, UpgradeRefused } from '../helpers/ws.js';

/**
 * Every registered route × every kind of credential. The route list comes from the running app,
 * so a route added later is covered automatically, and one outside the known realms fails here.
 */
const API_KEY = 'user-key-7f3a9c1e5b2d4f6a8c0e2b4d6f8a0c2e';
const ADMIN_KEY = 'admin-key-1b3d5f7a9c2e4b6d8f0a1c3e5b7d9f2a';
const WORKER_TOKEN = 'worker-token-9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b';
const WORKER = 'w-matrix';
const SECRETS = [API_KEY, ADMIN_KEY, WORKER_TOKEN];

/** Routes deliberately outside /api/v1 (none today); anything else there would escape auth. */
// The dashboard's static files (issue 19): no data, no key; every API call the page makes needs one.
const OUTSIDE_ALLOWED = new Set<string>(['GET /ui', 'HEAD /ui', 'GET /ui/*', 'HEAD /ui/*']);

type Cred = 'none' | 'wrong' | 'user' | 'admin' | 'worker';
const CREDS: Record<Cred, Record<string, string>> = {
  none: {},
  wrong: { 'x-api-key': 'not-the-key' },
  user: { 'x-api-key': API_KEY },
  admin: { 'x-admin-api-key': ADMIN_KEY },
  worker: { 'x-worker-id': WORKER, 'x-worker-token': WORKER_TOKEN },
};

/** 'ok' = passes authentication (any status but 401/403). */
type Expect = 401 | 403 | 'ok';
const EXPECTED: Record<RouteEntry['realm'], Record<Cred, Expect>> = {
  probe: { none: 'ok', wrong: 'ok', user: 'ok', admin: 'ok', worker: 'ok' },
  user: { none: 401, wrong: 401, user: 'ok', admin: 'ok', worker: 401 },
  admin: { none: 401, wrong: 401, user: 403, admin: 'ok', worker: 401 },
  worker: { none: 401, wrong: 401, user: 401, admin: 401, worker: 'ok' },
  // A replica's worker RPC (DESIGN §7): replica tokens only, never a user, admin or worker credential.
  rpc: { none: 401, wrong: 401, user: 401, admin: 401, worker: 401 },
  // E2B's envd plane (DESIGN §14): API keys are not its credential; the sandbox's envd access token is, per call.
  envd: { none: 'ok', wrong: 'ok', user: 'ok', admin: 'ok', worker: 'ok' },
  outside: { none: 'ok', wrong: 'ok', user: 'ok', admin: 'ok', worker: 'ok' },
};

const PARAMS: Record<string, string> = {
  id: 'sb-doesnotexist',
  workerID: WORKER,
  resourceID: 'sb-nolease',
  name: 'mock',
  ownerID: 'alice',
};
const concrete = (url: string) => url.replace(/:([A-Za-z_]+)/g, (_m, p: string) => PARAMS[p] ?? 'x').replace(/\*/g, 'x');

interface Seen {
  status: number;
  text: string;
}

async function hit(base: string, method: string, path: string, headers: Record<string, string>): Promise<Seen> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 5_000);
  try {
    const hasBody = !['GET', 'DELETE', 'OPTIONS'].includes(method);
    const res = await fetch(base + path, {
      method,
      headers: { ...headers, ...(hasBody ? { 'content-type': 'application/json' } : {}) },
      body: hasBody ? '{}' : undefined,
      signal: ac.signal,
    });
    // Streams (SSE) would never end: the status and headers are all we need.
    if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
      ac.abort();
      return { status: res.status, text: '' };
    }
    return { status: res.status, text: await res.text() };
  } finally {
    clearTimeout(timer);
  }
}

let srv: TestServer;
let routes: RouteEntry[];
beforeAll(async () => {
  srv = await startTestServer({
    auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY, worker_token: WORKER_TOKEN },
  });
  routes = routeTable(srv.plane.app);
});
afterAll(async () => srv?.close());

describe('realms', () => {
  // List-driven: each authenticated prefix (a realm added later, such as /e2b, is one more entry)
  // holds its own path and everything under it, and nothing else leaks out of a realm.
  it.each(REALM_PREFIXES.map((r) => [r.prefix, r.realm]))('%s and every path under it are in the %s realm', (prefix, realm) => {
    for (const path of [prefix, `${prefix}/x`, `${prefix}/x/y/z`]) expect(realmOf(path)).toBe(realm);
    // A longer name is not under the prefix (`/rpcx`, `/api/v1/adminx`).
    expect(realmOf(`${prefix}x`)).not.toBe(realm);
  });

  it('only the probes are open inside /api/v1, and only what no prefix names is outside', () => {
    expect(realmOf('/api/v1/live')).toBe('probe');
    expect(realmOf('/api/v1/ready')).toBe('probe');
    expect(realmOf('/ui')).toBe('outside');
    expect(realmOf('/rpc')).toBe('rpc');
    expect(realmOf('/rpc/exec/ws')).toBe('rpc');
  });
});

/** Routes whose own rule (after authentication) is 403 for the matrix's made-up ids. */
const AUTHZ_403 = new Set(['GET /api/v1/worker/sandboxes/:id/secrets']);

describe('auth matrix over the route table', () => {
  it('sees every route group, and nothing outside /api/v1 escapes', () => {
    const has = (m: string, u: string) => routes.some((r) => r.method === m && r.url === u);
    expect(has('GET', '/api/v1/sandboxes')).toBe(true);
    expect(has('GET', '/api/v1/live')).toBe(true);
    expect(has('GET', '/api/v1/health')).toBe(true);
    expect(has('GET', '/api/v1/admin/audit')).toBe(true);
    expect(has('GET', '/api/v1/admin/providers')).toBe(true);
    expect(has('DELETE', '/api/v1/admin/workers/:workerID')).toBe(true);
    expect(has('POST', '/api/v1/worker/:workerID/heartbeat')).toBe(true);
    expect(has('POST', '/api/v1/worker/:workerID/leases/:resourceID/renew')).toBe(true);
    expect(routes.length).toBeGreaterThan(25);
    const escaped = routes.filter((r) => r.realm === 'outside' && !OUTSIDE_ALLOWED.has(`${r.method} ${r.url}`));
    expect(escaped).toEqual([]);
    expect(
      routes
        .filter((r) => r.realm === 'probe')
        .map((r) => r.url)
        .sort(),
    ).toEqual(['/api/v1/live', '/api/v1/ready']);
  });

  it('answers each route with the status its realm demands, and never echoes a secret', async () => {
    const failures: string[] = [];
    let checked = 0;
    for (const route of routes) {
      if (route.method === 'OPTIONS') continue;
      for (const cred of Object.keys(CREDS) as Cred[]) {
        const want = EXPECTED[route.realm][cred];
        const got = await hit(srv.url, route.method, concrete(route.url), CREDS[cred]);
        checked++;
        // A route that answers 403 for a resource that is not the caller's after authenticating it
        // (a worker asking for secrets of a sandbox not placed on it: unknown ids too, so none can be probed).
        const authorized = got.status === 403 && AUTHZ_403.has(`${route.method} ${route.url}`) && /not placed on worker/.test(got.text);
        const ok = want === 'ok' ? got.status !== 401 && (got.status !== 403 || authorized) : got.status === want;
        const label = `${route.method} ${route.url} [${cred}] → ${got.status}, want ${want}`;
        if (!ok) failures.push(`${label}: ${got.text.slice(0, 160)}`);
        if (got.status === 401 || got.status === 403) {
          const body = JSON.parse(got.text) as { code: string | number; message: string };
          // E2B's realm (DESIGN.md §14) answers in E2B's shape: the status again as a number.
          const wantCode = route.url.startsWith('/e2b/') ? got.status : got.status === 401 ? 'unauthorized' : 'forbidden';
          if (body.code !== wantCode) failures.push(`${label}: code ${body.code}`);
        }
        for (const s of SECRETS) if (got.text.includes(s)) failures.push(`${label}: body contains a configured secret`);
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThan(100);
  }, 120_000);

  it('refuses WebSocket upgrades as its realm demands, with an HTTP JSON answer (never a hang)', async () => {
    const wsRoutes = routes.filter((r) => r.websocket);
    expect(wsRoutes.map((r) => `${r.method} ${r.url}`)).toContain('GET /api/v1/sandboxes/:id/exec/ws');
    const failures: string[] = [];
    for (const route of wsRoutes) {
      for (const cred of Object.keys(CREDS) as Cred[]) {
        const want = EXPECTED[route.realm][cred];
        // null: upgraded (101); else the HTTP answer that refused it.
        const refused: UpgradeRefused | null = await Promise.race([
          openWs(srv.url, concrete(route.url), CREDS[cred]).then(
            (c) => {
              c.ws.close();
              return null;
            },
            (err: unknown) => (err instanceof UpgradeRefused ? err : new UpgradeRefused(0, String(err))),
          ),
          new Promise<UpgradeRefused>((resolve) => setTimeout(() => resolve(new UpgradeRefused(0, 'no answer within 5 s')), 5_000)),
        ]);
        const status = refused ? refused.status : 101;
        const label = `upgrade ${route.url} [${cred}] → ${status}, want ${want}`;
        if (want === 'ok' ? status !== 101 : status !== want) failures.push(`${label}: ${refused?.body.slice(0, 160) ?? ''}`);
        if (refused && (status === 401 || status === 403)) {
          const body = JSON.parse(refused.body) as { code: string };
          if (body.code !== (status === 401 ? 'unauthorized' : 'forbidden')) failures.push(`${label}: code ${body.code}`);
          for (const s of SECRETS) if (refused.body.includes(s)) failures.push(`${label}: body contains a configured secret`);
        }
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('auth details', () => {
  it('a wrong X-Admin-API-Key is 401 even beside a valid user key', async () => {
    const r = await hit(srv.url, 'GET', '/api/v1/sandboxes', { 'x-api-key': API_KEY, 'x-admin-api-key': 'nope' });
    expect(r.status).toBe(401);
    expect(JSON.parse(r.text)).toEqual({ code: 'unauthorized', message: 'invalid X-Admin-API-Key' });
  });

  it('X-API-Key equal to the admin key opens admin routes', async () => {
    expect((await hit(srv.url, 'GET', '/api/v1/admin/providers', { 'x-api-key': ADMIN_KEY })).status).toBe(200);
  });

  it('the user key on an admin route is 403 forbidden', async () => {
    const r = await hit(srv.url, 'GET', '/api/v1/admin/audit', { 'x-api-key': API_KEY });
    expect(r.status).toBe(403);
    expect(JSON.parse(r.text).code).toBe('forbidden');
  });

  it('unknown routes need a key first, then 404', async () => {
    expect((await hit(srv.url, 'GET', '/api/v1/nope', {})).status).toBe(401);
    expect((await hit(srv.url, 'GET', '/api/v1/nope', { 'x-api-key': API_KEY })).status).toBe(404);
  });

  it('a worker token on a worker route of another worker is 403', async () => {
    const r = await hit(srv.url, 'POST', '/api/v1/worker/someone-else/heartbeat', CREDS.worker);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.text).code).toBe('forbidden');
  });
});

describe('auth modes', () => {
  it('keys read from _file references authenticate (trailing newline trimmed)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-keyfiles-'));
    const userFile = join(dir, 'api.key');
    const adminFile = join(dir, 'admin.key');
    writeFileSync(userFile, `${API_KEY}\n`, { mode: 0o600 });
    writeFileSync(adminFile, `${ADMIN_KEY}\n`, { mode: 0o600 });
    const s = await startTestServer({ auth: { enabled: true, api_key_file: userFile, admin_api_key_file: adminFile } });
    try {
      expect((await hit(s.url, 'GET', '/api/v1/sandboxes', {})).status).toBe(401);
      expect((await hit(s.url, 'GET', '/api/v1/sandboxes', { 'x-api-key': API_KEY })).status).toBe(200);
      expect((await hit(s.url, 'GET', '/api/v1/admin/audit', { 'x-api-key': API_KEY })).status).toBe(403);
      expect((await hit(s.url, 'GET', '/api/v1/admin/audit', { 'x-admin-api-key': ADMIN_KEY })).status).toBe(200);
    } finally {
      await s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('auth.enabled without a key is a config error', async () => {
    await expect(startTestServer({ auth: { enabled: true } })).rejects.toThrow(/auth\.api_key/);
  });

  it('fallback: with no admin key the api key opens admin routes but does not make normal callers admin', async () => {
    const s = await startTestServer({ auth: { enabled: true, api_key: API_KEY, enforce_ownership: true } });
    try {
      expect((await hit(s.url, 'GET', '/api/v1/admin/providers', { 'x-api-key': API_KEY })).status).toBe(200);
      expect((await hit(s.url, 'GET', '/api/v1/admin/providers', {})).status).toBe(401);
      const spawn = await hit(s.url, 'POST', '/api/v1/sandboxes', { 'x-api-key': API_KEY, 'x-user-id': 'alice' });
      const id = JSON.parse(spawn.text).id as string;
      expect((await hit(s.url, 'GET', `/api/v1/sandboxes/${id}`, { 'x-api-key': API_KEY, 'x-user-id': 'bob' })).status).toBe(404);
      // Presenting the key as X-Admin-API-Key is an explicit admin claim.
      expect((await hit(s.url, 'GET', `/api/v1/sandboxes/${id}`, { 'x-admin-api-key': API_KEY, 'x-user-id': 'bob' })).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('fallback disabled and no admin key: admin routes refuse the api key', async () => {
    const s = await startTestServer({ auth: { enabled: true, api_key: API_KEY, admin_fallback_enabled: false } });
    try {
      expect((await hit(s.url, 'GET', '/api/v1/admin/providers', { 'x-api-key': API_KEY })).status).toBe(403);
      expect((await hit(s.url, 'GET', '/api/v1/sandboxes', { 'x-api-key': API_KEY })).status).toBe(200);
    } finally {
      await s.close();
    }
  });

  it('auth disabled, no admin key: everything open, worker routes still need worker credentials', async () => {
    const s = await startTestServer({});
    try {
      expect((await hit(s.url, 'GET', '/api/v1/sandboxes', {})).status).toBe(200);
      expect((await hit(s.url, 'GET', '/api/v1/admin/audit', {})).status).toBe(200);
      const w = await hit(s.url, 'POST', '/api/v1/worker/w1/heartbeat', { 'x-worker-id': 'w1', 'x-worker-token': 'anything' });
      expect(w.status).toBe(401);
      expect(JSON.parse(w.text).message).toMatch(/worker authentication is not configured/);
    } finally {
      await s.close();
    }
  });

  it('auth disabled with an admin key: admin routes still require it', async () => {
    const s = await startTestServer({ auth: { admin_api_key: ADMIN_KEY } });
    try {
      expect((await hit(s.url, 'GET', '/api/v1/sandboxes', {})).status).toBe(200);
      expect((await hit(s.url, 'GET', '/api/v1/admin/providers', {})).status).toBe(401);
      expect((await hit(s.url, 'GET', '/api/v1/admin/providers', { 'x-admin-api-key': ADMIN_KEY })).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});
