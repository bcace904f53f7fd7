/**
 * Secrets injection at the egress gateway (DESIGN.md §15), with real components: an HTTPS upstream
 * (node:http2 with HTTP/1.1 allowed, and plain HTTP on 80) in a network namespace of its own, its
 * certificates from a test CA given to the gateway through `providers.docker.egress_ca_file`
 * (loadInterception, as compose does), names resolved through a hosts file of this test, and a
 * real EgressGateway on a real port whose `secrets` is a SecretSource built here from fixed
 * bindings (the secrets API, store and encryption are built separately). Clients CONNECT through
 * it like a sandbox does. Needs root and namespaces: SBX_TEST_NETNS=1.
 */
import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { Agent, request, type IncomingMessage } from 'node:http';
import { connect as h2Connect } from 'node:http2';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NodeCa } from '../../src/adapters/system/tls-ca.js';
import { loadInterception } from '../../src/compose/egress-secrets.js';
import type { SbxConfig } from '../../src/config/index.js';
import { parseRule } from '../../src/core/network/index.js';
import type { BoundSecret } from '../../src/core/secrets/port.js';
import { EgressGateway, type VerdictRecord } from '../../src/transports/egress/gateway.js';
import { HostsFile, hostResolver } from '../../src/transports/egress/resolver.js';
import { startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { tempDir } from '../helpers/tmp.js';

const SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and namespaces)';
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxsec${process.pid}`;
const VETH = `sbxsc${tag}h`;
const NET = `198.19.${tag}`;
const UP = `${NET}.2`;

const PH = (c: string) => `sbx_secret_${c.repeat(32)}`;
const TOKEN = 'tok-4b1d-secret-value';
const OTHER = 'other-77-secret-value';
const PLAIN = 'plain-9-secret-value';

/** The upstream: HTTPS (h2 and HTTP/1.1, a certificate per SNI name) on 443 and plain HTTP on 80; it echoes what it received. */
const SERVER = `
const fs = require('node:fs'), http = require('node:http'), http2 = require('node:http2'), tls = require('node:tls');
const [addr, dir] = process.argv.slice(2);
const ctx = (n) => tls.createSecureContext({ key: fs.readFileSync(dir + '/' + n + '.key'), cert: fs.readFileSync(dir + '/' + n + '.crt') });
const names = {
  'api.test': ctx('api.test'), 'other.test': ctx('other.test'), 'plain.test': ctx('plain.test'), 'bad.test': ctx('bad.test'),
};
const handler = (req, res) => {
  if (req.url.startsWith('/big/')) {
    const total = Number(req.url.slice(5)); const chunk = Buffer.alloc(65536, 120); let sent = 0;
    res.setHeader('content-length', String(total));
    const pump = () => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent); sent += n;
        if (!res.write(chunk.subarray(0, n))) return res.once('drain', pump);
      }
      res.end();
    };
    return pump();
  }
  let n = 0;
  req.on('data', (d) => (n += d.length));
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({
      version: req.httpVersion, method: req.method, url: req.url, headers: req.headers, port: req.socket.remotePort, bytes: n,
    }));
  });
};
const byIp = { key: fs.readFileSync(dir + '/ip.key'), cert: fs.readFileSync(dir + '/ip.crt') }; // no SNI: the IP's certificate
http2.createSecureServer({
  ...byIp, allowHTTP1: true, ALPNProtocols: ['h2', 'http/1.1'], SNICallback: (n, cb) => cb(null, names[n] || names['api.test']),
}, handler).listen(443, addr, () => {
  http.createServer(handler).listen(80, addr, () => process.stdout.write('ready\\n'));
});
`;

interface Echo {
  version: string;
  method: string;
  url: string;
  headers: Record<string, string>;
  port: number;
  bytes: number;
}

describe.skipIf(SKIP !== undefined)(`secrets injection at the egress gateway${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  let upstream: NetnsUpstream | undefined;
  let gw: EgressGateway;
  let nodeCa = '';
  let upstreamCa = '';
  const verdicts: VerdictRecord[] = [];
  const notices: string[] = [];
  let injections = 0;
  const secrets: BoundSecret[] = [
    { name: 'API_TOKEN', placeholder: PH('a'), value: TOKEN, hosts: [parseRule('api.test')], allowPlainHttp: false },
    { name: 'OTHER', placeholder: PH('b'), value: OTHER, hosts: [parseRule('other.test')], allowPlainHttp: false },
    { name: 'BAD', placeholder: PH('c'), value: 'never-sent', hosts: [parseRule('bad.test')], allowPlainHttp: false },
    { name: 'PLAIN', placeholder: PH('d'), value: PLAIN, hosts: [parseRule('api.test:80')], allowPlainHttp: true },
    { name: 'BY_IP', placeholder: PH('e'), value: 'ip-secret-value', hosts: [parseRule(`${UP}:443`)], allowPlainHttp: false },
  ];

  beforeAll(async () => {
    const dir = tempDir('sbx-egress-secrets-');
    // The upstream's certificates: a test CA the gateway is told of, and one it is not (bad.test).
    const testCa = await NodeCa.open(join(dir, 'test-ca'), 'sbx test upstream CA');
    const otherCa = await NodeCa.open(join(dir, 'untrusted-ca'), 'untrusted CA');
    upstreamCa = testCa.certPem;
    for (const [name, ca] of [
      ['api.test', testCa],
      ['other.test', testCa],
      ['plain.test', testCa],
      ['bad.test', otherCa],
    ] as const) {
      const leaf = await ca.leaf({ kind: 'name', name });
      writeFileSync(join(dir, `${name}.crt`), leaf.certPem);
      writeFileSync(join(dir, `${name}.key`), leaf.keyPem);
    }
    const ipLeaf = await testCa.leaf({ kind: 'ip', address: UP });
    writeFileSync(join(dir, 'ip.crt'), ipLeaf.certPem);
    writeFileSync(join(dir, 'ip.key'), ipLeaf.keyPem);
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [UP, dir]);
    const hosts = join(dir, 'hosts');
    writeFileSync(hosts, `${UP} api.test other.test plain.test bad.test\n`);
    const config = { providers: { docker: { egress_ca_file: join(dir, 'test-ca', 'ca.crt') } } } as SbxConfig;
    const interception = await loadInterception(config, join(dir, 'home'));
    nodeCa = interception.caPem;
    gw = new EgressGateway({
      host: '127.0.0.1',
      port: 0,
      sandboxFor: async () => 'sb-one',
      rules: async () => ({ allow: ['api.test', 'other.test', 'plain.test', 'bad.test', `${UP}:443`], deny: [] }),
      resolve: hostResolver(new HostsFile(hosts), async () => []),
      secrets: { forSandbox: async (id) => (id === 'sb-one' ? secrets : []) },
      interception: interception.tls,
      onVerdict: (v) => verdicts.push(v),
      onInjection: () => void injections++,
      onNotice: (_id, line) => notices.push(line),
    });
    await gw.start();
  }, 60_000);

  afterAll(async () => {
    await gw?.close();
    await upstream?.close();
  });

  /** CONNECT host:443 through the gateway, then TLS trusting `ca` only. */
  async function tunnel(host: string, ca: string, alpn: string[]): Promise<TLSSocket> {
    const req = request({ host: '127.0.0.1', port: gw.port, method: 'CONNECT', path: `${host}:443` });
    req.end();
    const [res, sock] = (await once(req, 'connect')) as [IncomingMessage, Socket];
    expect(res.statusCode).toBe(200);
    const byIp = /^[0-9.]+$/.test(host);
    const t = tlsConnect({ socket: sock, ...(byIp ? { host } : { servername: host }), ca, ALPNProtocols: alpn });
    await Promise.race([once(t, 'secureConnect'), once(t, 'error').then(([e]) => Promise.reject(e))]);
    return t;
  }

  /** HTTP/1.1 requests, one after another, over one tunnel (keep-alive); the agent may open no second one. */
  async function h1(sock: TLSSocket, host: string, reqs: Array<{ path: string; headers?: Record<string, string> }>) {
    let made = 0;
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    (agent as unknown as { createConnection: () => Socket }).createConnection = () => {
      made++;
      return sock;
    };
    const out: Array<{ status: number; body: string }> = [];
    for (const r of reqs) {
      const req = request({ agent, host, path: r.path, headers: r.headers ?? {} });
      req.end();
      const [res] = (await once(req, 'response')) as [IncomingMessage];
      let body = '';
      for await (const d of res) body += d;
      out.push({ status: res.statusCode ?? 0, body });
    }
    agent.destroy();
    return { out, made };
  }

  /** Raw bytes over an open tunnel: everything the other side sends until it closes (bounded). */
  async function raw(sock: TLSSocket, text: string): Promise<string> {
    let got = '';
    sock.on('data', (d) => (got += d));
    sock.write(text);
    await Promise.race([once(sock, 'close'), new Promise((r) => setTimeout(r, 5_000))]);
    sock.destroy();
    return got;
  }

  it(
    'HTTP/1.1 keep-alive: the upstream receives the real value on both requests of one connection, over one ' + 'upstream connection',
    async () => {
      const before = injections;
      const sock = await tunnel('api.test', nodeCa, ['http/1.1']);
      expect(sock.alpnProtocol).toBe('http/1.1');
      const { out, made } = await h1(sock, 'api.test', [
        { path: '/one', headers: { authorization: `Bearer ${PH('a')}` } },
        { path: '/two', headers: { 'x-api-key': PH('a') } },
      ]);
      expect(made).toBe(1);
      const [one, two] = out.map((o) => JSON.parse(o.body) as Echo);
      expect(one!.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(two!.headers['x-api-key']).toBe(TOKEN);
      expect(one!.version).toBe('1.1');
      expect(two!.port).toBe(one!.port);
      expect(injections - before).toBe(2);
      sock.destroy();
    },
  );

  it('HTTP/2 on both sides: the value is injected, the client and the upstream both speak h2', async () => {
    const sock = await tunnel('api.test', nodeCa, ['h2', 'http/1.1']);
    expect(sock.alpnProtocol).toBe('h2');
    const session = h2Connect('https://api.test', { createConnection: () => sock });
    const get = async (path: string, headers: Record<string, string>) => {
      const s = session.request({ ':path': path, ...headers });
      s.end();
      const [h] = (await once(s, 'response')) as [Record<string, string>];
      let body = '';
      for await (const d of s) body += d;
      return { status: Number(h[':status']), body };
    };
    const r = await get('/h2', { authorization: `Bearer ${PH('a')}` });
    expect(r.status).toBe(200);
    const echo = JSON.parse(r.body) as Echo;
    expect(echo.version).toBe('2.0');
    expect(echo.headers.authorization).toBe(`Bearer ${TOKEN}`);
    // Another secret's placeholder on the same session: refused, the session lives on.
    expect((await get('/h2', { authorization: `Bearer ${PH('b')}` })).status).toBe(403);
    expect((await get('/again', {})).status).toBe(200);
    session.close();
  });

  it('Basic credentials are decoded, replaced and re-encoded; a placeholder in the query string arrives unchanged', async () => {
    const sock = await tunnel('api.test', nodeCa, ['http/1.1']);
    const basic = Buffer.from(`user:${PH('a')}`).toString('base64');
    const { out } = await h1(sock, 'api.test', [{ path: `/q?key=${PH('a')}`, headers: { authorization: `Basic ${basic}` } }]);
    const echo = JSON.parse(out[0]!.body) as Echo;
    expect(Buffer.from(echo.headers.authorization!.slice(6), 'base64').toString()).toBe(`user:${TOKEN}`);
    expect(echo.url).toBe(`/q?key=${PH('a')}`);
    sock.destroy();
  });

  it(
    'a placeholder sent to another intercepted host (bound to another secret) gets 403 secret_not_allowed; ' + "that host's own works",
    async () => {
      const sock = await tunnel('other.test', nodeCa, ['http/1.1']);
      const { out } = await h1(sock, 'other.test', [{ path: '/', headers: { authorization: `Bearer ${PH('a')}` } }]);
      expect(out[0]!.status).toBe(403);
      expect(out[0]!.body).toContain('secret_not_allowed');
      expect(out[0]!.body).not.toContain(TOKEN);
      expect(verdicts).toContainEqual({
        sandbox_id: 'sb-one',
        host: 'other.test',
        port: 443,
        verdict: 'denied',
        reason: 'secret_not_allowed',
      });
      const ok = await h1(await tunnel('other.test', nodeCa, ['http/1.1']), 'other.test', [
        { path: '/', headers: { authorization: PH('b') } },
      ]);
      expect((JSON.parse(ok.out[0]!.body) as Echo).headers.authorization).toBe(OTHER);
    },
  );

  it('a foreign placeholder (no binding of this sandbox) is refused', async () => {
    const sock = await tunnel('api.test', nodeCa, ['http/1.1']);
    const { out } = await h1(sock, 'api.test', [{ path: '/', headers: { 'x-key': PH('f') } }]);
    expect(out[0]!.status).toBe(403);
    sock.destroy();
  });

  it("a tunnel to an allowed host without a secret stays end to end: the client sees the upstream's own certificate", async () => {
    const sock = await tunnel('plain.test', upstreamCa, ['http/1.1']);
    const { out } = await h1(sock, 'plain.test', [{ path: '/', headers: { authorization: `Bearer ${PH('a')}` } }]);
    // Unseen by the gateway: the placeholder goes as it was (no injection, no refusal).
    expect((JSON.parse(out[0]!.body) as Echo).headers.authorization).toBe(`Bearer ${PH('a')}`);
    sock.destroy();
    await expect(tunnel('plain.test', nodeCa, ['http/1.1'])).rejects.toThrow(/certificate/i);
    // And an intercepted host presents the node CA's leaf, not the upstream's.
    await expect(tunnel('api.test', upstreamCa, ['http/1.1'])).rejects.toThrow(/certificate/i);
  });

  it('an upstream whose certificate no trusted CA signed gets 502, and a console line says why', async () => {
    const sock = await tunnel('bad.test', nodeCa, ['http/1.1']);
    const { out } = await h1(sock, 'bad.test', [{ path: '/', headers: { authorization: PH('c') } }]);
    expect(out[0]!.status).toBe(502);
    expect(notices.some((n) => n.includes('bad.test:443') && n.includes('could not be verified'))).toBe(true);
    expect(notices.join('\n')).not.toContain('never-sent');
    sock.destroy();
  });

  it('strict parsing: Content-Length with Transfer-Encoding, another Host, and TRACE are refused and the connection closed', async () => {
    const both = await raw(
      await tunnel('api.test', nodeCa, ['http/1.1']),
      'POST / HTTP/1.1\r\nHost: api.test\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n',
    );
    expect(both).toMatch(/^HTTP\/1\.1 400 /);
    const host = await raw(
      await tunnel('api.test', nodeCa, ['http/1.1']),
      `GET / HTTP/1.1\r\nHost: other.test\r\nAuthorization: ${PH('a')}\r\n\r\n`,
    );
    expect(host).toMatch(/^HTTP\/1\.1 400 /);
    expect(host).toContain('another host');
    const trace = await raw(await tunnel('api.test', nodeCa, ['http/1.1']), 'TRACE / HTTP/1.1\r\nHost: api.test\r\n\r\n');
    expect(trace).toMatch(/^HTTP\/1\.1 405 /);
  });

  it('an IP host (its rule names the port) is intercepted with a leaf whose SAN is that IP', async () => {
    const sock = await tunnel(UP, nodeCa, ['http/1.1']);
    expect(sock.getPeerX509Certificate()?.subjectAltName).toBe(`IP Address:${UP}`);
    const { out } = await h1(sock, UP, [{ path: '/ip', headers: { authorization: PH('e') } }]);
    expect((JSON.parse(out[0]!.body) as Echo).headers.authorization).toBe('ip-secret-value');
    sock.destroy();
  });

  it('plain HTTP: only a secret that allows it is injected; another placeholder is refused', async () => {
    const get = (headers: Record<string, string>) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const r = request({ host: '127.0.0.1', port: gw.port, path: 'http://api.test/plain', headers }, async (res) => {
          let body = '';
          for await (const d of res) body += d;
          resolve({ status: res.statusCode ?? 0, body });
        });
        r.on('error', reject);
        r.end();
      });
    const ok = await get({ authorization: PH('d') });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as Echo).headers.authorization).toBe(PLAIN);
    const refused = await get({ authorization: PH('a') });
    expect(refused.status).toBe(403);
    expect(refused.body).toContain('secret_not_allowed');
  });
});
