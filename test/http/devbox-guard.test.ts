import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUnderDomain, normalizeHost } from '../../src/transports/shared/host.js';
import { openWs, UpgradeRefused } from '../helpers/ws.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

interface Raw {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
  json: any;
}

/** One request with exactly the headers given (Host included: fetch would not let us set it). */
function raw(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Raw> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        method,
        path,
        headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        timeout: 10_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => {
          let json: unknown;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

const ORIGIN_MSG = /^origin is not allowed: while auth is off the dev-box guard .*server\.cors_allowed_origins$/;
const HOST_MSG = /^host name is not allowed: .*DNS rebinding.*server\.allowed_hosts$/;
const preflightHeaders = (origin: string) => ({
  origin,
  'access-control-request-method': 'POST',
  'access-control-request-headers': 'content-type',
});

const REFUSED_ORIGINS = [
  'http://evil.example',
  'https://evil.example:7423',
  'http://127.0.0.1.evil.com',
  'http://localhost.evil.com',
  'http://evil-localhost',
  'http://localhost@evil.com',
  'http://evil.com#@localhost',
  'http://[::ffff:127.0.0.1]',
  'http://localhost.',
  'http://localhost/path',
  'ftp://localhost',
  'file://',
  'null',
  'garbage',
  'http://',
];
const ALLOWED_ORIGINS = [
  'http://localhost',
  'http://localhost:5173',
  'https://localhost',
  'http://LOCALHOST:3000',
  'http://127.0.0.1:8080',
  'http://127.9.8.7',
  'http://[::1]:3000',
];

describe('normalizeHost and the preview-domain label boundary', () => {
  it('lower-cases, strips the port and one trailing dot; refuses garbage', () => {
    expect(normalizeHost('Example.COM:7423')).toBe('example.com');
    expect(normalizeHost('example.com.')).toBe('example.com');
    expect(normalizeHost('example.com.:80')).toBe('example.com');
    expect(normalizeHost('[::1]:7423')).toBe('[::1]');
    expect(normalizeHost('[::1]')).toBe('[::1]');
    expect(normalizeHost('127.0.0.1:1')).toBe('127.0.0.1');
    for (const bad of [undefined, '', ' ', '.', 'a b', 'host:port', '[::1', '[nope]', 'user@host', 'a/b', '::1'])
      expect(normalizeHost(bad), String(bad)).toBeNull();
  });

  it('matches names strictly under the domain on a label boundary; an empty domain matches nothing', () => {
    expect(isUnderDomain('3000-sb-x.preview.test', 'preview.test')).toBe(true);
    expect(isUnderDomain('3000-sb-x.preview.test', '.Preview.Test.')).toBe(true);
    expect(isUnderDomain('evilpreview.test', 'preview.test')).toBe(false);
    expect(isUnderDomain('preview.test', 'preview.test')).toBe(false);
    expect(isUnderDomain('x.preview.test.evil.com', 'preview.test')).toBe(false);
    expect(isUnderDomain('anything', '')).toBe(false);
    expect(isUnderDomain('.', '')).toBe(false);
  });
});

describe('dev-box guard, auth off (defaults: cors "*")', () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    srv = await startTestServer();
    const r = await raw(srv.url, 'POST', '/api/v1/sandboxes', {}, '{}');
    expect(r.status).toBe(201);
    id = r.json.id;
  });
  afterAll(async () => srv?.close());

  const count = async () => (await raw(srv.url, 'GET', '/api/v1/sandboxes')).json.length as number;

  it('refuses every untrusted Origin with 403 before any route runs: nothing is spawned', async () => {
    const before = await count();
    for (const origin of REFUSED_ORIGINS) {
      const spawn = await raw(srv.url, 'POST', '/api/v1/sandboxes', { origin }, '{}');
      expect(spawn.status, origin).toBe(403);
      expect(spawn.json.code, origin).toBe('forbidden');
      expect(spawn.json.message, origin).toMatch(ORIGIN_MSG);
      expect(Object.keys(spawn.json).sort()).toEqual(['code', 'message']);
      expect(spawn.headers['access-control-allow-origin'], origin).toBeUndefined();
      const pre = await raw(srv.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders(origin));
      expect(pre.status, origin).toBe(403);
      expect(pre.headers['access-control-allow-origin'], origin).toBeUndefined();
      expect(pre.headers['access-control-allow-methods'], origin).toBeUndefined();
    }
    expect(await count()).toBe(before);
  });

  it('refuses them on probes, unknown API paths and a no-body POST too', async () => {
    for (const path of ['/api/v1/live', '/api/v1/ready', '/api/v1/no-such-route', '/api/v1/admin/audit', '/api/v1/openapi.json']) {
      const r = await raw(srv.url, 'GET', path, { origin: 'http://evil.example' });
      expect(r.status, path).toBe(403);
      expect(r.json.message).toMatch(ORIGIN_MSG);
    }
    const before = await count();
    const noBody = await raw(srv.url, 'POST', '/api/v1/sandboxes', { origin: 'http://evil.example', 'content-type': 'text/plain' });
    expect(noBody.status).toBe(403);
    expect(await count()).toBe(before);
  });

  it('lets loopback origins and requests without Origin through (CORS "*" answers them)', async () => {
    for (const origin of ALLOWED_ORIGINS) {
      const r = await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin });
      expect(r.status, origin).toBe(200);
      expect(r.headers['access-control-allow-origin'], origin).toBe('*');
      const pre = await raw(srv.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders(origin));
      expect(pre.status, origin).toBe(204);
    }
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes')).status).toBe(200);
  });

  it('refuses a rebinding Host (and other foreign names) with 403 on every API route', async () => {
    const port = new URL(srv.url).port;
    for (const host of [
      'rebind.example:7423',
      `rebind.example:${port}`,
      'evil.com',
      '127.0.0.1.evil.com',
      'localhost.evil.com',
      'xn--localhost',
      'bad host',
      'a.b:port',
    ]) {
      const r = await raw(srv.url, 'POST', '/api/v1/sandboxes', { host }, '{}');
      expect(r.status, host).toBe(403);
      expect(r.json.code).toBe('forbidden');
      expect(r.json.message).toMatch(HOST_MSG);
      const live = await raw(srv.url, 'GET', '/api/v1/live', { host });
      expect(live.status, host).toBe(403);
      // A same-origin-looking request from the rebound page is refused for its Host first.
      const same = await raw(srv.url, 'GET', '/api/v1/sandboxes', { host, origin: `http://${host}` });
      expect(same.status, host).toBe(403);
    }
    expect(await count()).toBe(1);
  });

  it('accepts IP literals, localhost and this machine’s name in Host (any case, port, one trailing dot)', async () => {
    const port = new URL(srv.url).port;
    for (const host of [
      `127.0.0.1:${port}`,
      '127.0.0.1',
      `LOCALHOST:${port}`,
      'localhost.',
      `[::1]:${port}`,
      '10.1.2.3',
      '[fe80::1]',
      hostname(),
      `${hostname().toUpperCase()}.:${port}`,
    ]) {
      const r = await raw(srv.url, 'GET', '/api/v1/sandboxes', { host });
      expect(r.status, host).toBe(200);
    }
  });

  it('refuses the SSE stream for a foreign Origin or Host', async () => {
    const sse = await raw(srv.url, 'GET', '/api/v1/events', { origin: 'http://evil.example', accept: 'text/event-stream' });
    expect(sse.status).toBe(403);
    expect(sse.headers['content-type']).toMatch(/json/);
    expect(sse.json.message).toMatch(ORIGIN_MSG);
    const rebind = await raw(srv.url, 'GET', '/api/v1/events', { host: 'rebind.example:7423', accept: 'text/event-stream' });
    expect(rebind.status).toBe(403);
    expect(rebind.json.message).toMatch(HOST_MSG);
  });

  it('refuses the WebSocket exec upgrade with 403: the command never runs', async () => {
    const marker = join(srv.dir, 'ws-marker');
    const path = `/api/v1/sandboxes/${id}/exec/ws`;
    for (const headers of [{ origin: 'http://evil.example' }, { origin: 'null' }, { host: 'rebind.example:7423' }] as Record<
      string,
      string
    >[]) {
      const err = await openWs(srv.url, path, headers).then(
        (c) => {
          c.send({ type: 'start', command: `touch ${marker}` });
          return null;
        },
        (e: unknown) => e,
      );
      expect(err, JSON.stringify(headers)).toBeInstanceOf(UpgradeRefused);
      expect((err as UpgradeRefused).status).toBe(403);
      expect(JSON.parse((err as UpgradeRefused).body).code).toBe('forbidden');
    }
    // The same socket from a localhost page works, which proves the refusals above were the guard's.
    const ok = await openWs(srv.url, path, { origin: 'http://localhost:3000' });
    ok.send({ type: 'start', command: `echo ran > ${join(srv.dir, 'ws-ok')}` });
    expect((await ok.rest()).at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
    expect(existsSync(join(srv.dir, 'ws-ok'))).toBe(true);
    expect(existsSync(marker)).toBe(false);
  });
});

describe('dev-box guard with an explicit list, allowed_hosts and a preview domain', () => {
  const APP = 'https://app.example.com';
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({
      server: {
        cors_allowed_origins: [APP, 'null', 'http://3000-sb-x.preview.test:7423'],
        allowed_hosts: ['sbx.lan', 'Box.Example.'],
        preview_domain: 'preview.test',
      },
    });
  });
  afterAll(async () => srv?.close());

  it('admits an origin of the list (echoed by CORS), never "null" even when listed', async () => {
    const pre = await raw(srv.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders(APP));
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe(APP);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin: 'https://APP.example.com:443' })).status).toBe(200);
    const nul = await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin: 'null' });
    expect(nul.status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin: 'https://other.example.com' })).status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin: 'http://app.example.com' })).status).toBe(403);
  });

  it('admits the names of server.allowed_hosts, and the request’s own origin on such a name (the dashboard)', async () => {
    for (const host of ['sbx.lan:7423', 'SBX.LAN', 'box.example', 'box.example.:80'])
      expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host })).status, host).toBe(200);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'sbx.lan:7423', origin: 'http://sbx.lan:7423' })).status).toBe(200);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'sbx.lan', origin: 'http://sbx.lan' })).status).toBe(200);
    // Not its own origin: another port, another scheme, or another allowed name.
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'sbx.lan:7423', origin: 'http://sbx.lan:7424' })).status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'sbx.lan:7423', origin: 'https://sbx.lan:7423' })).status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'localhost', origin: 'http://sbx.lan' })).status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'sub.sbx.lan' })).status).toBe(403);
  });

  it(
    'routes Host names under the preview domain (label boundary only) to previews, never the API; never ' + 'trusts an origin there',
    async () => {
      // A preview host is the preview proxy's, whatever the path: the API never answers it.
      const preview = await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: '3000-sb-x.preview.test:7423' });
      expect(preview.status).toBe(404);
      expect(preview.json.message).toMatch(/sandbox sb-x not found/);
      for (const host of ['preview.test', 'evilpreview.test', 'preview.test.evil.com']) {
        expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host })).status, host).toBe(403);
      }
      // Own origin and even a listed entry: a page under the preview domain is sandbox content.
      expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { origin: 'http://3000-sb-x.preview.test:7423' })).status).toBe(403);
    },
  );
});

describe('dev-box guard with an empty preview domain', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ server: { preview_domain: '' } });
  });
  afterAll(async () => srv?.close());

  it('matches no name under it', async () => {
    for (const host of ['x.', '.', 'a.b', '3000-sb-x.'])
      expect((await raw(srv.url, 'GET', '/api/v1/live', { host })).status, host).toBe(403);
  });
});

describe('admin key alone: auth stays off, so the guard stays on', () => {
  const ADMIN = 'admin-only-key-0123456789abcdef0123456789';
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { admin_api_key: ADMIN } });
  });
  afterAll(async () => srv?.close());

  it('refuses a foreign origin and host even with the admin key; admin routes still need the key', async () => {
    expect((await raw(srv.url, 'GET', '/api/v1/admin/providers', { origin: 'http://evil.example', 'x-admin-api-key': ADMIN })).status).toBe(
      403,
    );
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes', { host: 'rebind.example' })).status).toBe(403);
    expect((await raw(srv.url, 'GET', '/api/v1/sandboxes')).status).toBe(200);
    expect((await raw(srv.url, 'GET', '/api/v1/admin/providers')).status).toBe(401);
    expect((await raw(srv.url, 'GET', '/api/v1/admin/providers', { 'x-admin-api-key': ADMIN })).status).toBe(200);
  });
});

describe('auth on: the guard is off, the spec’s CORS rules stand alone', () => {
  const KEY = 'guard-off-user-key-0123456789abcdef012345';
  let wild: TestServer;
  let listed: TestServer;
  beforeAll(async () => {
    wild = await startTestServer({ auth: { enabled: true, api_key: KEY } });
    listed = await startTestServer({ auth: { api_key: KEY }, server: { cors_allowed_origins: ['https://app.example.com'] } });
  });
  afterAll(async () => {
    await wild?.close();
    await listed?.close();
  });

  it('wildcard: any origin and any Host reach the routes (the key decides)', async () => {
    const pre = await raw(wild.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders('http://evil.example'));
    expect(pre.status).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('*');
    const noKey = await raw(wild.url, 'GET', '/api/v1/sandboxes', { origin: 'http://evil.example', host: 'rebind.example:7423' });
    expect(noKey.status).toBe(401);
    const withKey = await raw(wild.url, 'GET', '/api/v1/sandboxes', {
      origin: 'http://evil.example',
      host: 'rebind.example:7423',
      'x-api-key': KEY,
    });
    expect(withKey.status).toBe(200);
    expect(withKey.headers['access-control-allow-origin']).toBe('*');
  });

  it('explicit list (auth switched on by the key alone): the list decides, localhost is not special', async () => {
    expect((await raw(listed.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders('https://app.example.com'))).status).toBe(204);
    const local = await raw(listed.url, 'OPTIONS', '/api/v1/sandboxes', preflightHeaders('http://localhost:3000'));
    expect(local.status).toBe(403);
    expect(local.json.message).toBe('origin is not allowed by server.cors_allowed_origins');
    expect((await raw(listed.url, 'GET', '/api/v1/sandboxes', { host: 'rebind.example', 'x-api-key': KEY })).status).toBe(200);
    expect((await raw(listed.url, 'GET', '/api/v1/sandboxes')).status).toBe(401);
  });
});
