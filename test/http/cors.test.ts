import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

const API_KEY = 'cors-user-key-3c5e7a9b1d2f4a6c8e0b2d4f';
const APP = 'https://app.example.com';

const preflight = (base: string, path: string, origin: string) =>
  fetch(base + path, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-api-key, content-type' },
  });

describe('CORS with an explicit origin list and auth on', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({
      auth: { enabled: true, api_key: API_KEY },
      server: { cors_allowed_origins: [APP, 'http://localhost:3000'] },
    });
  });
  afterAll(async () => srv?.close());

  it('answers a preflight from an allowed origin before authentication', async () => {
    const res = await preflight(srv.url, '/api/v1/sandboxes', APP);
    expect(res.status).toBe(204);
    expect(await res.text()).toBe('');
    expect(res.headers.get('access-control-allow-origin')).toBe(APP);
    expect(res.headers.get('vary')).toMatch(/Origin/);
    expect(res.headers.get('access-control-allow-methods')).toMatch(/POST/);
    expect(res.headers.get('access-control-allow-methods')).toMatch(/DELETE/);
    const allowed = (res.headers.get('access-control-allow-headers') ?? '').toLowerCase();
    const list = allowed.split(',').map((h) => h.trim());
    for (const h of [
      'x-api-key',
      'x-admin-api-key',
      'x-user-id',
      'x-request-id',
      'content-type',
      'last-event-id',
      'authorization',
      'x-worker-id',
      'x-worker-token',
    ]) {
      expect(list, h).toContain(h);
    }
    expect(Number(res.headers.get('access-control-max-age'))).toBeGreaterThan(0);
  });

  it('preflights admin, worker and unknown paths alike (never 401, 404 or 405)', async () => {
    for (const p of ['/api/v1/admin/audit', '/api/v1/worker/w1/heartbeat', '/api/v1/sandboxes/sb-x/exec', '/api/v1/no-such-route']) {
      const res = await preflight(srv.url, p, APP);
      expect(res.status, p).toBe(204);
    }
  });

  it('refuses a preflight from another origin with 403 JSON and no allow-origin', async () => {
    const res = await preflight(srv.url, '/api/v1/sandboxes', 'https://evil.example.net');
    expect(res.status).toBe(403);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    expect(await res.json()).toEqual({ code: 'forbidden', message: 'origin is not allowed by server.cors_allowed_origins' });
  });

  it('decorates actual responses, including 401s, for allowed origins only', async () => {
    const ok = await fetch(`${srv.url}/api/v1/sandboxes`, { headers: { origin: APP, 'x-api-key': API_KEY } });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('access-control-allow-origin')).toBe(APP);
    const exposed = ok.headers.get('access-control-expose-headers') ?? '';
    for (const h of ['X-Request-ID', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'Retry-After']) expect(exposed).toContain(h);

    const denied = await fetch(`${srv.url}/api/v1/sandboxes`, { headers: { origin: APP } });
    expect(denied.status).toBe(401);
    expect(denied.headers.get('access-control-allow-origin')).toBe(APP);

    const other = await fetch(`${srv.url}/api/v1/sandboxes`, { headers: { origin: 'https://evil.example.net', 'x-api-key': API_KEY } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    expect(other.headers.get('vary')).toMatch(/Origin/);
  });
});

describe('CORS default wildcard', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: API_KEY } });
  });
  afterAll(async () => srv?.close());

  it('allows any origin with *', async () => {
    const res = await preflight(srv.url, '/api/v1/templates', 'https://anything.example');
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    const get = await fetch(`${srv.url}/api/v1/live`, { headers: { origin: 'https://anything.example' } });
    expect(get.status).toBe(200);
    expect(get.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('a plain OPTIONS without Origin is answered, not 405', async () => {
    const res = await fetch(`${srv.url}/api/v1/sandboxes`, { method: 'OPTIONS' });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('wrong methods are still 405 and unknown paths 404 (OPTIONS did not pollute the route table)', async () => {
    const wrong = await fetch(`${srv.url}/api/v1/live`, { method: 'DELETE', headers: { 'x-api-key': API_KEY } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET');
    const unknown = await fetch(`${srv.url}/api/v1/nothing-here`, { headers: { 'x-api-key': API_KEY } });
    expect(unknown.status).toBe(404);
  });
});

describe('CORS with an empty origin list', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ server: { cors_allowed_origins: [] } });
  });
  afterAll(async () => srv?.close());

  // What `sbx config lint` says about the empty list: every origin is refused, none allowed.
  it('refuses every origin: preflights 403, responses without allow-origin', async () => {
    for (const origin of [APP, 'http://localhost:3000', 'null']) {
      const res = await preflight(srv.url, '/api/v1/sandboxes', origin);
      expect(res.status, origin).toBe(403);
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
    }
    // Auth is off here, so the dev-box guard refuses a foreign origin before any route runs; a
    // localhost page passes the guard and gets the CORS answer (no allow-origin).
    const foreign = await fetch(`${srv.url}/api/v1/live`, { headers: { origin: APP } });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { message: string }).message).toMatch(/server\.cors_allowed_origins/);
    const local = await fetch(`${srv.url}/api/v1/live`, { headers: { origin: 'http://localhost:3000' } });
    expect(local.status).toBe(200);
    expect(local.headers.get('access-control-allow-origin')).toBeNull();
  });
});
