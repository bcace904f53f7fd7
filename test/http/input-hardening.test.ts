import { createHmac, createHash } from 'node:crypto';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Sends raw bytes over TCP and resolves with everything the server wrote before closing. */
function rawRequest(url: string, bytes: Buffer | string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.setTimeout(5000, () => socket.destroy(new Error('no answer within 5s')));
    socket.write(bytes);
  });
}

function parseRaw(text: string): { status: number; headers: Record<string, string>; body: unknown } {
  const [head, body = ''] = text.split('\r\n\r\n');
  const [statusLine, ...lines] = head!.split('\r\n');
  const headers: Record<string, string> = {};
  for (const l of lines) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
  return { status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(body) };
}

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => srv?.close());

describe('owner ids refuse C1 controls and Unicode separators (spec 2.6, 5.1 rule 1)', () => {
  it('X-User-ID and body owner_id with U+0085, U+00A0 or U+2028 are 400', async () => {
    for (const ch of ['\u0085', '\u00a0', '\u0080', '\u009f']) {
      // A header value is Latin-1 on the wire, so these are single bytes 0x80-0xff.
      const viaHeader = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': `a${ch}b` });
      expect(viaHeader.status, JSON.stringify(ch)).toBe(400);
      expect(viaHeader.body.code).toBe('bad_request');
      expect(viaHeader.body.message).toMatch(/^X-User-ID must not contain/);
    }
    for (const ch of ['\u0085', '\u00a0', '\u2028', '\u2029', '\u200b']) {
      const viaBody = await call(srv.url, 'POST', '/api/v1/sandboxes', { owner_id: `a${ch}b` });
      expect(viaBody.status, JSON.stringify(ch)).toBe(400);
      expect(viaBody.body).toMatchObject({ code: 'bad_request' });
      expect(viaBody.body.message).toMatch(/^owner_id must not contain/);
      const admission = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', { owner_id: `a${ch}b` });
      expect(admission.status).toBe(400);
    }
    expect(await srv.plane.deps.store.listSandboxes()).toEqual([]);
  });

  it('an X-User-ID sent as UTF-8 bytes means the characters they spell, as in the body', async () => {
    // `à` is C3 A0 in UTF-8: read byte by byte as Latin-1 it would be `Ã` and a no-break space.
    for (const owner of ['jürgen', 'voilà', '東京']) {
      const asSent = Buffer.from(owner, 'utf8').toString('latin1');
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', {}, { 'X-User-ID': asSent });
      expect(res.status, owner).toBe(200);
      const quota = await call(srv.url, 'PUT', `/api/v1/quotas/${encodeURIComponent(owner)}`, { max_sandboxes: 1 });
      expect(quota.status).toBe(200);
      const usage = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', {}, { 'X-User-ID': asSent });
      expect(usage.body.max_owner_sandboxes, owner).toBe(1);
      await call(srv.url, 'DELETE', `/api/v1/quotas/${encodeURIComponent(owner)}`);
    }
  });
});

describe('X-User-ID is validated on every /api/v1 route (spec 5.1 rule 1)', () => {
  const paths = [
    ['GET', '/api/v1/quotas'],
    ['GET', '/api/v1/quotas/summary'],
    ['GET', '/api/v1/templates'],
    ['GET', '/api/v1/providers'],
    ['GET', '/api/v1/health'],
    ['GET', '/api/v1/live'],
    ['GET', '/api/v1/ready'],
    ['GET', '/api/v1/workers'],
    ['GET', '/api/v1/diagnostics'],
    ['GET', '/api/v1/metrics/prometheus'],
    ['GET', '/api/v1/events'],
    ['GET', '/api/v1/admin/quotas'],
    ['PUT', '/api/v1/quotas/alice'],
    ['GET', '/api/v1/no-such-route'],
  ] as const;

  it('a malformed header is 400 {code, message} before the route runs', async () => {
    for (const [method, path] of paths) {
      for (const bad of ['a/b', 'a\\b', 'a b', 'x'.repeat(129), 'a\u0085b']) {
        const res = await call(srv.url, method, path, method === 'PUT' ? { max_sandboxes: 1 } : undefined, { 'X-User-ID': bad });
        expect(res.status, `${method} ${path} ${JSON.stringify(bad)}`).toBe(400);
        expect(res.headers.get('content-type')).toMatch(/^application\/json/);
        expect(Object.keys(res.body).sort()).toEqual(['code', 'message']);
        expect(res.body.code).toBe('bad_request');
        expect(res.body.message).toMatch(/^X-User-ID must/);
      }
    }
    expect(await srv.plane.deps.store.listQuotas()).toEqual([]);
  });

  it('a valid or blank header passes', async () => {
    for (const [method, path] of paths.filter(([, p]) => !p.includes('no-such') && p !== '/api/v1/events')) {
      const res = await call(srv.url, method, path, method === 'PUT' ? { max_sandboxes: 1 } : undefined, { 'X-User-ID': ' ok-user ' });
      expect(res.status, `${method} ${path}`).toBe(200);
    }
    expect((await call(srv.url, 'GET', '/api/v1/quotas', undefined, { 'X-User-ID': '   ' })).status).toBe(200);
  });

  it('CORS preflight still answers first', async () => {
    const res = await call(srv.url, 'OPTIONS', '/api/v1/sandboxes', undefined, {
      // A local page: with auth off the dev-box guard refuses other origins (DESIGN §3).
      Origin: 'http://localhost:5173',
      'Access-Control-Request-Method': 'POST',
      'X-User-ID': 'a/b',
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
  });

  it('is checked before credentials, so no key is needed to learn the header is malformed', async () => {
    const key = 'hardening-key-8c1e3b5d7f9a1c3e5b7d9f1a';
    const s = await startTestServer({ auth: { enabled: true, api_key: key } });
    try {
      expect((await call(s.url, 'GET', '/api/v1/quotas', undefined, { 'X-User-ID': 'a/b' })).body.code).toBe('bad_request');
      expect((await call(s.url, 'GET', '/api/v1/quotas', undefined, { 'X-User-ID': 'ok' })).status).toBe(401);
      expect((await call(s.url, 'GET', '/api/v1/quotas', undefined, { 'X-User-ID': 'ok', 'X-API-Key': key })).status).toBe(200);
    } finally {
      await s.close();
    }
  });
});

describe('requests the HTTP parser refuses get the spec error body (spec 7)', () => {
  for (const [name, byte] of [
    ['0x01', '\x01'],
    ['0x7f', '\x7f'],
  ] as const) {
    it(`a header value with ${name} is 400 bad_request`, async () => {
      const text = await rawRequest(srv.url, `GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-Custom: a${byte}b\r\n\r\n`);
      const res = parseRaw(text);
      expect(res.status).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.headers.connection).toBe('close');
      expect(res.body).toEqual({ code: 'bad_request', message: 'malformed HTTP request (invalid character in a header name or value)' });
    });
  }

  it('a malformed request line is 400 bad_request', async () => {
    const res = parseRaw(await rawRequest(srv.url, 'GET /api/v1/health HTTP/9.x\r\nHost: x\r\n\r\n'));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'bad_request' });
    expect(Object.keys(res.body as object).sort()).toEqual(['code', 'message']);
  });

  it('oversized headers or request lines are 413 payload_too_large (DESIGN §3 pair), and never echo the request', async () => {
    const secret = 'S3cret-In-Header-' + 'z'.repeat(40_000);
    const res = parseRaw(await rawRequest(srv.url, `GET /api/v1/health HTTP/1.1\r\nHost: x\r\nX-API-Key: ${secret}\r\n\r\n`));
    expect(res.status).toBe(413);
    expect(res.body).toEqual({ code: 'payload_too_large', message: 'request line or headers are larger than the server accepts' });
    const longQuery = parseRaw(
      await rawRequest(srv.url, `GET /api/v1/sandboxes/x/files?path=/${'q'.repeat(40_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
    );
    expect(longQuery.status).toBe(413);
    expect(longQuery.body).toMatchObject({ code: 'payload_too_large' });
  });

  it('paths the router cannot read are 400 {code, message}, without echoing the path', async () => {
    for (const path of ['/api/v1/sandboxes/%E0%A4%A', '/api/v1/quotas/%ZZ', `/api/v1/quotas/${'x'.repeat(600)}`]) {
      const res = await call(srv.url, 'PUT', path, {});
      expect(res.status, path.slice(0, 40)).toBe(400);
      expect(Object.keys(res.body).sort()).toEqual(['code', 'message']);
      expect(res.body.code).toBe('bad_request');
      expect(res.text).not.toContain('%ZZ');
      expect(res.text).not.toContain('xxxxxxxx');
      expect(res.headers.get('x-request-id')).toBeTruthy();
    }
  });

  it('the server keeps serving afterwards', async () => {
    expect((await call(srv.url, 'GET', '/api/v1/health')).status).toBe(200);
  });
});

describe('integer request fields are bounded by what the stores hold', () => {
  it('quota max_sandboxes above 2147483647 is 400 from the schema; the maximum is stored exactly', async () => {
    for (const n of [1e20, 2_147_483_648, -1]) {
      const res = await call(srv.url, 'PUT', '/api/v1/quotas/big', { max_sandboxes: n });
      expect(res.status, String(n)).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toMatch(/max_sandboxes/);
    }
    const ok = await call(srv.url, 'PUT', '/api/v1/quotas/big', { max_sandboxes: 2_147_483_647 });
    expect(ok.status).toBe(200);
    expect((await call(srv.url, 'GET', '/api/v1/quotas/big')).body.max_sandboxes).toBe(2_147_483_647);
  });

  it('an absurd quota duration is 400', async () => {
    for (const field of ['max_ttl', 'max_exec_timeout']) {
      const res = await call(srv.url, 'PUT', '/api/v1/quotas/big', { [field]: '100000000000h' });
      expect(res.status, field).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toMatch(new RegExp(`^${field}`));
    }
    expect((await call(srv.url, 'GET', '/api/v1/quotas/big')).body).toMatchObject({ max_ttl: '0s', max_exec_timeout: '0s' });
  });

  it('spawn memory_mb and vcpus above 2147483647 are 400; the maximum fits', async () => {
    for (const body of [{ memory_mb: 1e20 }, { memory_mb: 2_147_483_648 }, { vcpus: 2_147_483_648 }]) {
      for (const path of ['/api/v1/sandboxes', '/api/v1/sandboxes/admission']) {
        const res = await call(srv.url, 'POST', path, body);
        expect(res.status, `${path} ${JSON.stringify(body)}`).toBe(400);
        expect(res.body.code).toBe('bad_request');
      }
    }
    const ok = await call(srv.url, 'POST', '/api/v1/sandboxes', { memory_mb: 2_147_483_647, vcpus: 2_147_483_647, ttl: '1m' });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ memory_mb: 2_147_483_647, vcpus: 2_147_483_647 });
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${ok.body.id}`);
  });

  it('logs lines and audit limit are bounded', async () => {
    const sb = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '1m' });
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${sb.body.id}/logs?lines=99999999999`)).status).toBe(400);
    expect((await call(srv.url, 'GET', '/api/v1/admin/audit?limit=99999999999')).status).toBe(400);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${sb.body.id}`);
  });
});

describe('derived owners are keyed with a per-installation secret', () => {
  it('key/… and ip/… are HMACs under the stored secret, not plain digests', async () => {
    const apiKey = 'weak';
    const byKey = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '1m' }, { 'X-API-Key': apiKey });
    const byIp = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '1m' });
    const secret = await srv.plane.deps.store.getMeta('derived_owner_key');
    expect(secret).toMatch(/^[0-9a-f]{64}$/);
    const mac = (s: string) => createHmac('sha256', Buffer.from(secret!, 'hex')).update(s).digest('hex').slice(0, 16);
    expect(byKey.body.owner_id).toBe(`key/${mac(`api_key:${apiKey}`)}`);
    expect(byIp.body.owner_id).toBe(`ip/${mac('ip:127.0.0.1')}`);
    const unsalted = createHash('sha256').update(`api_key:${apiKey}`).digest('hex').slice(0, 16);
    expect(byKey.body.owner_id).not.toContain(unsalted);

    // The secret is shown nowhere.
    for (const p of [
      '/api/v1/diagnostics',
      '/api/v1/metrics',
      '/api/v1/metrics/prometheus',
      `/api/v1/sandboxes/${byKey.body.id}`,
      '/api/v1/sandboxes',
    ]) {
      expect((await call(srv.url, 'GET', p)).text, p).not.toContain(secret);
    }
    expect(JSON.stringify(srv.plane.deps.bus.since(0))).not.toContain(secret);
  });

  it('stays the same across a restart of one installation and differs between installations', async () => {
    const a = await startTestServer();
    const b = await startTestServer();
    try {
      const ownerOf = async (url: string) =>
        (await call(url, 'POST', '/api/v1/sandboxes', { ttl: '1m' }, { 'X-API-Key': 'same-key' })).body.owner_id as string;
      const first = await ownerOf(a.url);
      expect(first).toMatch(/^key\/[0-9a-f]{16}$/);
      expect(await ownerOf(b.url)).not.toBe(first);

      // Restart `a` on its own store: same secret, same derived owner.
      const { createControlPlane } = await import('../../src/compose/control-plane.js');
      const { loadConfig } = await import('../../src/config/index.js');
      const { pino } = await import('pino');
      await a.plane.close();
      const { config } = await loadConfig({
        cwd: a.dir,
        home: a.dir,
        env: {},
        overrides: {
          server: { host: '127.0.0.1', port: 0 },
          database: { driver: 'sqlite', path: `${a.dir}/sbx.db` },
          providers: { default: 'mock', mock: { root_dir: `${a.dir}/mock` } },
        } as never,
      });
      const again = await createControlPlane(config, { home: a.dir, logger: pino({ level: 'silent' }), reconcile: false });
      try {
        expect(await ownerOf(await again.listen())).toBe(first);
      } finally {
        await again.close();
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});
