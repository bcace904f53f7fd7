import { createServer as createHttp, request, type Server } from 'node:http';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseClientHello } from '../../src/transports/egress/client-hello.js';
import { refused } from '../../src/transports/egress/dns-refuser.js';
import { EgressGateway, type VerdictRecord } from '../../src/transports/egress/gateway.js';
import { splitAuthority } from '../../src/transports/egress/gateway-wire.js';

/** The first bytes a TLS client sends, captured by a server that never answers. */
async function helloBytes(servername?: string): Promise<Buffer> {
  return new Promise((resolve) => {
    const srv = createServer((sock) => {
      sock.once('data', (d: Buffer) => {
        resolve(d);
        sock.destroy();
        srv.close();
      });
    });
    srv.listen(0, '127.0.0.1', () => {
      const c = tlsConnect({
        host: '127.0.0.1',
        port: (srv.address() as AddressInfo).port,
        ...(servername ? { servername } : {}),
        rejectUnauthorized: false,
      });
      c.on('error', () => undefined);
    });
  });
}

describe('ClientHello SNI', () => {
  it('reads the server name of a real ClientHello, bounded', async () => {
    const hello = await helloBytes('files.example.test');
    expect(parseClientHello(hello)).toEqual({ kind: 'hello', sni: 'files.example.test' });
    expect(parseClientHello(hello.subarray(0, 20))).toEqual({ kind: 'incomplete' });
    expect(parseClientHello(await helloBytes())).toEqual({ kind: 'hello', sni: null });
    expect(parseClientHello(Buffer.from('GET / HTTP/1.1\r\n\r\n'))).toEqual({ kind: 'invalid' });
    const huge = Buffer.from([0x16, 0x03, 0x01, 0xff, 0xff]);
    expect(parseClientHello(huge)).toEqual({ kind: 'invalid' });
  });
});

describe('DNS refuser', () => {
  it('answers a query REFUSED with its id and question; ignores responses and junk', () => {
    const q = Buffer.from('abcd01000001000000000000' + '02757004746573740000010001', 'hex');
    const r = refused(q)!;
    expect(r.subarray(0, 2).toString('hex')).toBe('abcd');
    expect(r[2]! & 0x80).toBe(0x80);
    expect(r[3]! & 0x0f).toBe(5);
    expect(r.length).toBe(q.length);
    const response = Buffer.from(q);
    response[2] = 0x81;
    expect(refused(response)).toBeNull();
    expect(refused(Buffer.from('xx'))).toBeNull();
  });
});

describe('splitAuthority', () => {
  it('is strict about ports and brackets', () => {
    expect(splitAuthority('up.test:443', null)).toEqual({ host: 'up.test', port: 443 });
    expect(splitAuthority('[::1]:8080', null)).toEqual({ host: '[::1]', port: 8080 });
    expect(splitAuthority('up.test', 80)).toEqual({ host: 'up.test', port: 80 });
    for (const bad of ['up.test', 'up.test:0', 'up.test:65536', 'up.test:08', 'a:b:c', 'user@up.test:80', '[::1', ':80'])
      expect(splitAuthority(bad, null), bad).toBeNull();
  });
});

describe('egress gateway (loopback upstream)', () => {
  let up: Server;
  let upPort: number;
  let gw: EgressGateway;
  const verdicts: VerdictRecord[] = [];
  let hang: Array<() => void> = [];
  let known = true;

  beforeAll(async () => {
    up = createHttp((req, res) => res.end(`up ${req.headers.host} ${req.url}`));
    await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
    upPort = (up.address() as AddressInfo).port;
    gw = new EgressGateway({
      host: '127.0.0.1',
      port: 0,
      sandboxFor: async () => (known ? 'sb-one' : null),
      // 127.0.0.0/8 opens loopback for this test: a CIDR inside the special range.
      rules: async () => ({ allow: ['up.test', 'slow.test', '127.0.0.0/8'], deny: ['bad.up.test'] }),
      resolve: async (name) => {
        if (name === 'slow.test') await new Promise<void>((r) => hang.push(r));
        return ['127.0.0.1'];
      },
      onVerdict: (v) => verdicts.push(v),
      maxConnectionsPerSandbox: 20,
    });
    await gw.start();
  });
  afterAll(async () => {
    for (const h of hang) h();
    await gw?.close();
    up?.close();
  });

  const get = (url: string, headers: Record<string, string> = {}) =>
    new Promise<{ status: number; body: string }>((resolve, reject) => {
      const r = request({ host: '127.0.0.1', port: gw.port, path: url, headers }, (res) => {
        let body = '';
        res.on('data', (d) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      r.on('error', reject);
      r.end();
    });

  it('proxies an allowed name with Host rewritten from the URI; denies the rest', async () => {
    expect(await get(`http://up.test:${upPort}/x`, { host: 'evil.test' })).toEqual({ status: 200, body: `up up.test:${upPort} /x` });
    expect((await get(`http://bad.up.test:${upPort}/`)).body).toContain('denied (deny_rule)');
    expect((await get(`http://other.test:${upPort}/`)).body).toContain('denied (no_rule)');
    expect((await get('/relative')).status).toBe(400);
    expect(verdicts).toContainEqual({ sandbox_id: 'sb-one', host: 'bad.up.test', port: upPort, verdict: 'denied', reason: 'deny_rule' });
  });

  it('an unknown source is denied', async () => {
    known = false;
    try {
      expect((await get(`http://up.test:${upPort}/`)).status).toBe(403);
    } finally {
      known = true;
    }
  });

  it('at most 8 lookups in flight per sandbox; more are denied with limit', async () => {
    const slow = Array.from({ length: 8 }, () => get(`http://slow.test:${upPort}/`));
    await new Promise((r) => setTimeout(r, 100));
    expect((await get(`http://slow.test:${upPort}/`)).body).toContain('denied (limit)');
    for (const h of hang) h();
    hang = [];
    for (const r of await Promise.all(slow)) expect(r.status).toBe(200);
  });

  it('more connections than the cap get 503; a malformed line gets 400; the gateway stays up', async () => {
    const socks: Socket[] = [];
    let c503 = 0;
    await Promise.all(
      Array.from(
        { length: 25 },
        () =>
          new Promise<void>((resolve) => {
            const s = connect(gw.port, '127.0.0.1', () => resolve());
            s.on('data', (d) => {
              if (String(d).startsWith('HTTP/1.1 503')) c503++;
            });
            s.on('error', () => resolve());
            socks.push(s);
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 200));
    // Keep-alive sockets of the earlier requests count too: at least the 5 over the cap.
    expect(c503).toBeGreaterThanOrEqual(5);
    for (const s of socks) s.destroy();
    await new Promise((r) => setTimeout(r, 100));
    const raw = await new Promise<string>((resolve) => {
      const s = connect(gw.port, '127.0.0.1', () => s.write('NOT A REQUEST\r\n\r\n'));
      let out = '';
      s.on('data', (d) => (out += d));
      s.on('close', () => resolve(out));
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400/);
    expect((await get(`http://up.test:${upPort}/still`)).status).toBe(200);
  });
});
