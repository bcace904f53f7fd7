/**
 * Live preview (DESIGN.md §9) end to end: a real control plane, a real HTTP server started inside
 * a sandbox (busybox httpd, a CGI echo, an `nc` upgrade echo), fetched through the proxy by Host —
 * on mock always, on docker and proot when their flags say they are here.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/index.js';
import { BIG, CGI_ECHO, freePort, hostRequest, UPGRADE_ECHO, upgradeEcho } from '../helpers/preview.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, requireEngine, TEST_IMAGE } from '../docker/engine.js';

const DOMAIN = 'preview.test';

interface Served {
  srv: TestServer;
  client: Client;
  id: string;
  port: number;
  upgradePort: number;
  stop: AbortController;
}

/** A sandbox serving /workspace/www with busybox httpd on `port` and an upgrade echo on `upgradePort`. */
async function serveInSandbox(srv: TestServer, opts: { bindAll: boolean; spawn?: Record<string, unknown> }): Promise<Served> {
  const client = new Client({ url: srv.url });
  const box = await client.spawn(opts.spawn ?? {});
  await client.files.write(box.id, '/workspace/www/index.html', '<h1>hello from the sandbox</h1>\n');
  await client.files.write(box.id, '/workspace/www/big.bin', BIG);
  await client.files.write(box.id, '/workspace/www/cgi-bin/echo', CGI_ECHO, { mode: '755' });
  await client.files.write(box.id, '/workspace/www/up.sh', UPGRADE_ECHO, { mode: '755' });
  const port = opts.bindAll ? 8080 : await freePort();
  const upgradePort = opts.bindAll ? 9090 : await freePort();
  const addr = (p: number) => (opts.bindAll ? String(p) : `127.0.0.1:${p}`);
  const stop = new AbortController();
  const command = `busybox nc -ll -p ${upgradePort} -e ./up.sh & exec busybox httpd -f -p ${addr(port)} -h .`;
  // The server lives as long as this exec: it is left streaming until the suite ends.
  const it = client.execStream(box.id, { command, workdir: '/workspace/www' }, { signal: stop.signal })[Symbol.asyncIterator]();
  void it.next().catch(() => undefined);
  const host = `${port}-${box.id}.${DOMAIN}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    const r = await hostRequest(srv.url, host, '/index.html').catch(() => null);
    if (r?.status === 200) break;
    if (Date.now() > deadline) throw new Error(`the sandbox's httpd did not answer through the proxy: ${r?.status} ${r?.body.toString()}`);
    await new Promise((res) => setTimeout(res, 200));
  }
  return { srv, client, id: box.id, port, upgradePort, stop };
}

function previewSuite(name: string, start: () => Promise<TestServer>, bindAll: boolean) {
  let s: Served;
  const host = (port = s.port, id = s.id) => `${port}-${id}.${DOMAIN}`;

  beforeAll(async () => {
    s = await serveInSandbox(await start(), { bindAll });
  }, 120_000);
  afterAll(async () => {
    s?.stop.abort();
    // Destroyed before the server goes: no runtime (a proot copy, a container) is left behind.
    await s?.client.destroy(s.id).catch(() => undefined);
    await s?.client.close();
    await s?.srv.close();
  });

  it(`${name}: serves a page through the proxy by Host, with its status and headers`, async () => {
    const r = await hostRequest(s.srv.url, host(), '/index.html');
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe('<h1>hello from the sandbox</h1>\n');
    expect(r.headers['content-type']).toMatch(/text\/html/);
    const missing = await hostRequest(s.srv.url, host(), '/nope.html');
    expect(missing.status).toBe(404);
  });

  it(`${name}: a 5 MiB body arrives byte-exact`, async () => {
    const r = await hostRequest(s.srv.url, host(), '/big.bin');
    expect(r.status).toBe(200);
    expect(r.body.length).toBe(BIG.length);
    expect(r.body.equals(BIG)).toBe(true);
  });

  it(`${name}: a POST body is echoed; X-Forwarded-* set; API credentials never reach the sandbox`, async () => {
    const body = randomBytes(256 * 1024);
    const r = await hostRequest(s.srv.url, host(), '/cgi-bin/echo', {
      method: 'POST',
      body,
      headers: { 'content-type': 'application/octet-stream', 'x-api-key': 'sekret-api-key-1', 'x-sbx-preview-token': 'abc' },
    });
    expect(`${r.status} ${r.status === 200 ? '' : r.body.toString()}`).toBe('200 ');
    expect(r.headers['x-method']).toBe('POST');
    expect(r.headers['x-saw-forwarded-host']).toBe(host());
    expect(r.headers['x-saw-forwarded-proto']).toBe('http');
    expect(r.headers['x-saw-api-key']).toBe('');
    expect(r.headers['x-saw-token']).toBe('');
    expect(r.body.equals(body)).toBe(true);
  });

  it(`${name}: the Host is matched case-insensitively, with any port`, async () => {
    const r = await hostRequest(s.srv.url, `${host().toUpperCase()}:7423`, '/index.html');
    expect(r.status).toBe(200);
  });

  it(`${name}: an upgrade is tunnelled both ways`, async () => {
    const payload = randomBytes(64 * 1024);
    const r = await upgradeEcho(s.srv.url, host(s.upgradePort), payload);
    expect(r.head).toMatch(/^HTTP\/1\.1 101/);
    expect(r.echoed.subarray(0, payload.length).equals(payload)).toBe(true);
  });

  it(`${name}: a closed port is 502, a bad port 400, an unknown sandbox 404 — all JSON`, async () => {
    const closed = await hostRequest(s.srv.url, host(bindAll ? 8181 : await freePort()), '/');
    expect(closed.status).toBe(502);
    expect(JSON.parse(closed.body.toString())).toMatchObject({
      code: 'bad_gateway',
      message: expect.stringMatching(/nothing is listening/),
    });
    for (const bad of ['0', '70000']) {
      const r = await hostRequest(s.srv.url, `${bad}-${s.id}.${DOMAIN}`, '/');
      expect(r.status).toBe(400);
      expect(JSON.parse(r.body.toString()).code).toBe('bad_request');
    }
    const unknown = await hostRequest(s.srv.url, host(s.port, 'sb-doesnotexist'), '/');
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body.toString()).code).toBe('not_found');
    const junk = await hostRequest(s.srv.url, `not-a-preview.${DOMAIN}`, '/');
    expect(junk.status).toBe(404);
  });

  it(`${name}: the API on the same port is unaffected`, async () => {
    const res = await fetch(`${s.srv.url}/api/v1/sandboxes/${s.id}`);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { preview_domain: string }).preview_domain).toBe(DOMAIN);
  });
}

describe('live preview on mock', () => {
  previewSuite('mock', () => startTestServer({ server: { preview_domain: DOMAIN } }), false);
});

describe('live preview on mock: WebSocket, destroy, metrics', () => {
  let srv: TestServer;
  let client: Client;
  beforeAll(async () => {
    srv = await startTestServer({ server: { preview_domain: DOMAIN } });
    client = new Client({ url: srv.url });
  });
  afterAll(async () => {
    await client.close();
    await srv.close();
  });

  it('a WebSocket echo server in the sandbox works through the proxy; a destroyed sandbox is 404', async () => {
    const box = await client.spawn();
    const port = await freePort();
    const script =
      `const {WebSocketServer}=require('ws');const s=new ` +
      `WebSocketServer({host:'127.0.0.1',port:${port}});s.on('connection',c=>c.on('message',(m,b)=>c.send(m,{binary:b})));`;
    const stop = new AbortController();
    const nodeModules = join(import.meta.dirname, '..', '..', 'node_modules');
    const it = client
      .execStream(
        box.id,
        { command: process.execPath, args: ['-e', script], mode: 'argv', env: { NODE_PATH: nodeModules } },
        { signal: stop.signal },
      )
      [Symbol.asyncIterator]();
    void it.next().catch(() => undefined);
    const u = new URL(srv.url);
    const host = `${port}-${box.id}.${DOMAIN}`;
    let echoed: string | null = null;
    const deadline = Date.now() + 15_000;
    while (echoed === null && Date.now() < deadline) {
      echoed = await new Promise<string | null>((resolve) => {
        const ws = new WebSocket(`ws://${u.host}/socket`, { headers: { host } });
        ws.on('open', () => ws.send('ping through the proxy'));
        ws.on('message', (m) => {
          resolve(String(m));
          ws.close();
        });
        ws.on('error', () => resolve(null));
        ws.on('unexpected-response', () => resolve(null));
      });
      if (echoed === null) await new Promise((r) => setTimeout(r, 200));
    }
    expect(echoed).toBe('ping through the proxy');

    const metrics = await client.prometheus();
    expect(metrics).toMatch(/sbx_preview_requests_total\{kind="upgrade"\} [1-9]/);
    expect(metrics).toMatch(/sbx_preview_bytes_total\{direction="out"\} [1-9]/);
    const diag = (await (await fetch(`${srv.url}/api/v1/admin/diagnostics`)).json()) as {
      preview: Record<string, unknown>;
      pool: Record<string, unknown>;
    };
    expect(diag.preview).toMatchObject({ domain: DOMAIN, auth: false, upgrades: expect.any(Number) });
    expect(diag.preview.upgrades as number).toBeGreaterThan(0);
    expect(diag.pool).toEqual({ enabled: false });

    await client.destroy(box.id);
    stop.abort();
    const gone = await hostRequest(srv.url, host, '/');
    expect(gone.status).toBe(404);
    expect(JSON.parse(gone.body.toString()).code).toBe('not_found');
  });
});

describe('live preview with server.preview_auth', () => {
  let s: Served;
  beforeAll(async () => {
    const srv = await startTestServer({ server: { preview_domain: DOMAIN, preview_auth: true } });
    s = await serveInSandboxWithToken(srv);
  }, 60_000);
  afterAll(async () => {
    s?.stop.abort();
    await s?.client.close();
    await s?.srv.close();
  });

  async function serveInSandboxWithToken(srv: TestServer): Promise<Served> {
    const client = new Client({ url: srv.url });
    const box = await client.spawn();
    const token = box.preview_token!;
    await client.files.write(box.id, '/workspace/www/index.html', 'private page\n');
    await client.files.write(box.id, '/workspace/www/cgi-bin/echo', CGI_ECHO, { mode: '755' });
    const port = await freePort();
    const stop = new AbortController();
    const it = client
      .execStream(
        box.id,
        { command: `exec busybox httpd -f -p 127.0.0.1:${port} -h .`, workdir: '/workspace/www' },
        { signal: stop.signal },
      )
      [Symbol.asyncIterator]();
    void it.next().catch(() => undefined);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const r = await hostRequest(srv.url, `${port}-${box.id}.${DOMAIN}`, '/index.html', {
        headers: { 'x-sbx-preview-token': token },
      }).catch(() => null);
      if (r?.status === 200) break;
      if (Date.now() > deadline) throw new Error('httpd did not answer');
      await new Promise((res) => setTimeout(res, 200));
    }
    return { srv, client, id: box.id, port, upgradePort: 0, stop };
  }

  it('the token is on the sandbox object for its owner; without it 401, with it 200; ?sbx_token= once sets a cookie', async () => {
    const box = await s.client.get(s.id);
    expect(box.preview_token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    const host = `${s.port}-${s.id}.${DOMAIN}`;
    const none = await hostRequest(s.srv.url, host, '/index.html');
    expect(none.status).toBe(401);
    expect(JSON.parse(none.body.toString()).code).toBe('unauthorized');
    const wrong = await hostRequest(s.srv.url, host, '/index.html', { headers: { 'x-sbx-preview-token': 'x'.repeat(32) } });
    expect(wrong.status).toBe(401);
    const ok = await hostRequest(s.srv.url, host, '/index.html', { headers: { 'x-sbx-preview-token': box.preview_token! } });
    expect(ok.status).toBe(200);
    expect(ok.body.toString()).toBe('private page\n');

    const once = await hostRequest(s.srv.url, host, `/index.html?a=1&sbx_token=${box.preview_token}`);
    expect(once.status).toBe(302);
    expect(once.headers.location).toBe('/index.html?a=1');
    const cookie = String(once.headers['set-cookie']).split(';')[0]!;
    expect(cookie).toBe(`sbx_preview_token=${box.preview_token}`);
    expect(String(once.headers['set-cookie'])).toMatch(/HttpOnly/);
    // The cookie opens the page; the sandbox never sees the token or the cookie.
    const echo = await hostRequest(s.srv.url, host, '/cgi-bin/echo', {
      method: 'POST',
      body: Buffer.from('x'),
      headers: { cookie: `${cookie}; theirs=1` },
    });
    expect(echo.status).toBe(200);
    expect(echo.headers['x-saw-cookie']).toBe('theirs=1');
    // A token is for one sandbox only.
    const other = await s.client.spawn();
    const foreign = await hostRequest(s.srv.url, `${s.port}-${other.id}.${DOMAIN}`, '/', {
      headers: { 'x-sbx-preview-token': box.preview_token! },
    });
    expect(foreign.status).toBe(401);
  });
});

const dockerSkip = DOCKER_SKIP;
describe.skipIf(dockerSkip !== undefined)(`live preview on docker${dockerSkip ? ` (skipped: ${dockerSkip})` : ''}`, () => {
  previewSuite(
    'docker',
    async () => {
      await requireEngine();
      return startTestServer({
        server: { preview_domain: DOMAIN },
        providers: { default: 'docker' },
        defaults: { image: TEST_IMAGE, memory_mb: 64 },
      });
    },
    true,
  );
});

describe.skipIf(dockerSkip !== undefined)('live preview on docker without a network', () => {
  it('network none: 502 saying the sandbox has no network', async () => {
    const srv = await startTestServer({
      server: { preview_domain: DOMAIN },
      providers: { default: 'docker', docker: { network_mode: 'none' } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
    try {
      const client = new Client({ url: srv.url });
      const box = await client.spawn();
      const r = await hostRequest(srv.url, `8080-${box.id}.${DOMAIN}`, '/');
      expect(r.status).toBe(502);
      expect(JSON.parse(r.body.toString())).toMatchObject({ code: 'bad_gateway', message: expect.stringMatching(/no network/) });
      await client.destroy(box.id);
      await client.close();
    } finally {
      await srv.close();
    }
  }, 60_000);
});

const prootOn = process.env.SBX_TEST_PROOT === '1';
describe.skipIf(!prootOn)(`live preview on proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let dir: string;
  let installation = '';
  previewSuite(
    'proot',
    async () => {
      dir = mkdtempSync(join(tmpdir(), 'sbx-preview-proot-'));
      const rootfs = join(dir, 'rootfs');
      execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
      const srv = await startTestServer({ server: { preview_domain: DOMAIN }, providers: { default: 'proot', proot: { rootfs } } });
      installation = srv.plane.installationId;
      return srv;
    },
    false,
  );
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
    // The proot provider's work directory of this installation (under the OS temp directory).
    rmSync(join(tmpdir(), `sbx-proot-${installation}`), { recursive: true, force: true });
    rmSync(join(tmpdir(), `.sbx-proot-${installation}.sbx`), { recursive: true, force: true });
  });
});

describe('sbx preview', () => {
  it(
    'prints the URL on the server scheme and port (with the token once under preview_auth); bad port and no ' + 'domain are clear errors',
    async () => {
      const { fakeCli } = await import('../helpers/cli-context.js');
      const { runCommand } = await import('../../src/transports/cli/run-command.js');
      const { previewCommand } = await import('../../src/transports/cli/commands/preview.js');
      const srv = await startTestServer({ server: { preview_domain: DOMAIN, preview_auth: true } });
      const off = await startTestServer();
      try {
        const client = new Client({ url: srv.url });
        const box = await client.spawn();
        const cli = fakeCli({ url: srv.url });
        expect(await runCommand(previewCommand, cli.ctx, { id: box.id.slice(0, 8), port: '8080' })).toBe(0);
        const port = new URL(srv.url).port;
        expect(cli.stdout().trim()).toBe(`http://8080-${box.id}.${DOMAIN}:${port}/?sbx_token=${box.preview_token}`);
        await cli.close();

        const bad = fakeCli({ url: srv.url });
        expect(await runCommand(previewCommand, bad.ctx, { id: box.id, port: '0' })).toBe(2);
        expect(bad.stderr()).toMatch(/port must be a number from 1 to 65535/);
        await bad.close();

        const offClient = new Client({ url: off.url });
        const plain = await offClient.spawn();
        const none = fakeCli({ url: off.url });
        expect(await runCommand(previewCommand, none.ctx, { id: plain.id, port: '80' })).toBe(1);
        expect(none.stderr()).toMatch(/previews are off on this server/);
        await none.close();
        await client.close();
        await offClient.close();
      } finally {
        await srv.close();
        await off.close();
      }
    },
  );
});
