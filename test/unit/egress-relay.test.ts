/**
 * The egress gateway's http relay (DESIGN.md §10, src/transports/egress/http-relay.ts) against real
 * loopback sockets: after the verdict the request head is written once and the answer piped back
 * raw, so what the client gets must still be exactly the upstream's answer — bodies with a length,
 * chunked both ways, HEAD, 100-continue — with the connection's own headers replaced by
 * `Connection: close`, one 100 Continue (the gateway's own; the upstream's is not relayed), nothing
 * served behind a relayed answer on the same socket, and a 502 when
 * the upstream gives no answer.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer as createHttp, request, type IncomingMessage, type Server } from 'node:http';
import { connect, createServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EgressGateway } from '../../src/transports/egress/gateway.js';
import { UpstreamReads } from '../../src/transports/egress/http-relay.js';

const BIG = randomBytes(3 * 1024 * 1024 + 17);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let up: Server;
let upPort: number;
let silent: NetServer;
let silentPort: number;
const silentSockets = new Set<import('node:net').Socket>();
let gw: EgressGateway;
const STREAM = 48 * 1024 * 1024;
const PIECE = 64 * 1024;
/** The last /stream answer: bytes the upstream's socket has taken, and their hash. */
let streamed = { written: 0, hash: createHash('sha256') };

/** /stream: 48 MiB, each 64 KiB piece a different byte, written as fast as the reader takes them. */
function pumpStream(res: import('node:http').ServerResponse): void {
  streamed = { written: 0, hash: createHash('sha256') };
  const s = streamed;
  const pump = () => {
    while (s.written < STREAM && !res.destroyed) {
      const piece = Buffer.alloc(PIECE, (s.written / PIECE) % 251);
      s.hash.update(piece);
      s.written += PIECE;
      if (!res.write(piece)) return void res.once('drain', pump);
    }
    res.end();
  };
  res.writeHead(200, { 'content-length': String(STREAM) });
  pump();
}
const seen: Array<{ method: string; url: string; headers: IncomingMessage['headers']; body: Buffer }> = [];

beforeAll(async () => {
  up = createHttp((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      if (req.url === '/big') return res.end(BIG);
      if (req.url === '/stream') return pumpStream(res);
      if (req.url === '/chunked') {
        res.setHeader('keep-alive', 'timeout=5');
        res.write('part one, ');
        setTimeout(() => res.end('part two'), 20);
        return;
      }
      if (req.url === '/echo') return res.end(`${req.method} ${body.length} ${sha(body)}`);
      res.setHeader('x-up', 'yes');
      res.end(`up ${req.headers.host} ${req.url}`);
    });
  });
  await new Promise<void>((r) => up.listen(0, '127.0.0.1', r));
  upPort = (up.address() as AddressInfo).port;
  // Accepts and closes without a byte: no HTTP answer.
  silent = createServer((s) => {
    silentSockets.add(s);
    s.on('error', () => undefined);
    s.end();
  });
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  silentPort = (silent.address() as AddressInfo).port;
  gw = new EgressGateway({
    host: '127.0.0.1',
    port: 0,
    sandboxFor: async () => 'sb-relay',
    rules: async () => ({ allow: ['up.test', '127.0.0.0/8'], deny: [] }),
    resolve: async () => ['127.0.0.1'],
  });
  await gw.start();
});

afterAll(async () => {
  await gw.close();
  up.closeAllConnections();
  await new Promise<void>((r) => up.close(() => r()));
  for (const s of silentSockets) s.destroy();
  await new Promise<void>((r) => silent.close(() => r()));
});

/** One request through the gateway with node:http; the whole answer. */
function via(
  path: string,
  opts: { method?: string; body?: Buffer; chunked?: boolean; headers?: Record<string, string>; port?: number } = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.body && !opts.chunked) headers['content-length'] = String(opts.body.length);
    const r = request(
      {
        host: '127.0.0.1',
        port: gw.port,
        method: opts.method ?? 'GET',
        path: `http://up.test:${opts.port ?? upPort}${path}`,
        headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    r.on('error', reject);
    if (opts.body && opts.chunked) {
      // Several writes: node sends them chunked.
      for (let at = 0; at < opts.body.length; at += 100_000) r.write(opts.body.subarray(at, at + 100_000));
      r.end();
    } else r.end(opts.body);
  });
}

describe('http relay after the verdict', () => {
  it('GET: the upstream sees origin-form, Host from the URI and Connection: close; the client gets its answer unchanged', async () => {
    const r = await via('/path?q=1', { headers: { 'proxy-authorization': 'Basic c2VjcmV0', 'x-mine': 'kept' } });
    expect(r.status).toBe(200);
    expect(r.body.toString()).toBe(`up up.test:${upPort} /path?q=1`);
    expect(r.headers['x-up']).toBe('yes');
    expect(r.headers.connection).toBe('close');
    const s = seen.at(-1)!;
    expect(s.url).toBe('/path?q=1');
    expect(s.headers.host).toBe(`up.test:${upPort}`);
    expect(s.headers.connection).toBe('close');
    expect(s.headers['x-mine']).toBe('kept');
    expect(s.headers['proxy-authorization']).toBeUndefined();
  });

  it('3 MiB down and up, with a length and chunked: every byte arrives', async () => {
    const big = await via('/big');
    expect(big.body.length).toBe(BIG.length);
    expect(sha(big.body)).toBe(sha(BIG));
    const sized = await via('/echo', { method: 'POST', body: BIG });
    expect(sized.body.toString()).toBe(`POST ${BIG.length} ${sha(BIG)}`);
    const chunked = await via('/echo', { method: 'PUT', body: BIG, chunked: true });
    expect(chunked.body.toString()).toBe(`PUT ${BIG.length} ${sha(BIG)}`);
    expect(seen.at(-1)!.headers['transfer-encoding']).toBe('chunked');
  });

  it('a chunked answer is relayed as the upstream framed it, its Keep-Alive replaced by Connection: close', async () => {
    const r = await via('/chunked');
    expect(r.body.toString()).toBe('part one, part two');
    expect(r.headers['transfer-encoding']).toBe('chunked');
    expect(r.headers['keep-alive']).toBeUndefined();
    expect(r.headers.connection).toBe('close');
  });

  it('HEAD gets the head alone; Expect: 100-continue gets its 100 then the answer', async () => {
    const h = await via('/big', { method: 'HEAD' });
    expect(h.status).toBe(200);
    expect(seen.at(-1)!.method).toBe('HEAD');
    expect(h.body.length).toBe(0);
    const body = Buffer.from('after continue');
    const raw = await rawExchange(
      `POST http://up.test:${upPort}/echo HTTP/1.1\r\nHost: up.test\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
      body,
    );
    expect(raw).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 OK\r\n/);
    expect(raw.match(/100 Continue/g)?.length).toBe(1);
    expect(raw).toContain('\r\nConnection: close\r\n');
    expect(raw.endsWith(`POST ${body.length} ${sha(body)}`)).toBe(true);
  });

  it('a request pipelined behind a relayed answer is not served: the connection closes after the first', async () => {
    const one = `GET http://up.test:${upPort}/first HTTP/1.1\r\nHost: up.test\r\n\r\n`;
    const two = `GET http://up.test:${upPort}/second HTTP/1.1\r\nHost: up.test\r\n\r\n`;
    const before = seen.length;
    const raw = await rawExchange(one + two);
    expect(raw.match(/HTTP\/1\.1 200/g)?.length).toBe(1);
    expect(raw).toContain('/first');
    expect(seen.slice(before).map((s) => s.url)).toEqual(['/first']);
  });

  it('a client that stops reading holds the upstream back; every byte then arrives in order', async () => {
    const s = connect(gw.port, '127.0.0.1');
    s.write(`GET http://up.test:${upPort}/stream HTTP/1.1\r\nHost: up.test\r\n\r\n`);
    const hash = createHash('sha256');
    let head: Buffer | null = Buffer.alloc(0);
    let body = 0;
    const ended = new Promise<void>((resolve, reject) => {
      s.on('end', resolve);
      s.on('error', reject);
    });
    const first = new Promise<void>((resolve) => {
      s.on('data', (d: Buffer) => {
        if (head !== null) {
          head = Buffer.concat([head, d]);
          const at = head.indexOf('\r\n\r\n');
          if (at < 0) return;
          d = head.subarray(at + 4);
          head = null;
          s.pause();
          resolve();
        }
        hash.update(d);
        body += d.length;
      });
    });
    await first;
    // The upstream fills the buffers between it and the paused client, then waits (polled, bounded).
    const deadline = Date.now() + 10_000;
    let last = -1;
    while (streamed.written !== last && Date.now() < deadline) {
      last = streamed.written;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(streamed.written).toBe(last);
    expect(streamed.written).toBeLessThan(STREAM / 2);
    s.resume();
    await ended;
    expect(body).toBe(STREAM);
    expect(hash.digest('hex')).toBe(streamed.hash.digest('hex'));
  });

  it('an upstream that closes without an answer: 502, and the gateway keeps serving', async () => {
    const r = await via('/x', { port: silentPort });
    expect(r.status).toBe(502);
    expect(r.body.toString()).toBe('sbx egress: upstream failed\n');
    expect((await via('/after')).body.toString()).toBe(`up up.test:${upPort} /after`);
  });
});

/** Writes `head` (then `body` on a 100 Continue) on one socket; everything the gateway sends until it closes. */
function rawExchange(head: string, body?: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(gw.port, '127.0.0.1');
    let got = '';
    let sent = false;
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (body && !sent && got.includes('100 Continue\r\n\r\n')) {
        sent = true;
        s.write(body);
      }
    });
    s.on('error', reject);
    s.on('close', () => resolve(got));
    s.setTimeout(10_000, () => s.destroy(new Error('no close')));
    s.write(head);
  });
}

describe('UpstreamReads', () => {
  /** One read as net does it: into the buffer the options give, then the callback. */
  const readInto = (reads: UpstreamReads, text: string) => {
    const buf = reads.options.onread.buffer();
    buf.write(text);
    reads.options.onread.callback(text.length, buf);
    return buf;
  };

  it('reuses its buffer while the consumer lets go of each read; a kept read moves it to a new one', () => {
    const reads = new UpstreamReads();
    const got: string[] = [];
    let keep = false;
    reads.take((chunk) => {
      got.push(chunk.toString());
      return keep ? 'kept' : undefined;
    });
    const a = readInto(reads, 'one');
    expect(reads.options.onread.buffer()).toBe(a);
    keep = true;
    readInto(reads, 'two');
    const b = reads.options.onread.buffer();
    expect(b).not.toBe(a);
    expect(a.subarray(0, 3).toString()).toBe('two');
    expect(got).toEqual(['one', 'two']);
  });

  it('reads while no consumer is set are copied and handed to the next consumer first, in order', () => {
    const reads = new UpstreamReads();
    readInto(reads, 'early');
    readInto(reads, 'later');
    const got: string[] = [];
    reads.take((chunk) => void got.push(chunk.toString()));
    readInto(reads, 'now');
    expect(got).toEqual(['early', 'later', 'now']);
  });
});
