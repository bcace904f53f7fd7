/**
 * NetTransport (src/client/net-transport.ts, the `sbx exec` fast path's HTTP/1.1 on node:net)
 * against NodeTransport (node:http) on the same answers: a raw TCP server on a real port writes
 * exact bytes (Content-Length, chunked with extensions and trailers, until close, 1xx before the
 * final answer, HEAD and 204, repeated headers, a hang-up, a short body, a broken chunk) and both
 * transports must read the same status, headers and body, or both fail. The request bytes it sends
 * are checked as the server received them, and every split of a chunked answer across reads.
 */
import { once } from 'node:events';
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Http1Response } from '../../src/client/http1-response.js';
import { NetTransport } from '../../src/client/net-transport.js';
import { NodeTransport } from '../../src/client/node-transport.js';
import type { Transport, TransportResponse } from '../../src/client/transport.js';

/** What the server answers, by request path: raw bytes, then it closes its side. */
const ANSWERS: Record<string, string | null> = {
  '/length': 'HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello',
  '/chunked':
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Type: application/octet-stream\r\n\r\n' +
    '5;ext=1\r\nhello\r\n6\r\n world\r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n',
  '/close': 'HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the server closes',
  '/continue': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok',
  '/no-content': 'HTTP/1.1 204 No Content\r\nX-Id: 7\r\n\r\n',
  '/head': 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n',
  '/repeated':
    'HTTP/1.1 404 Not Found\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Many: one\r\nX-Many: two\r\n' +
    'Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
  '/hang-up': '',
  '/short': 'HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc',
  '/bad-chunk': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n',
  '/not-http': 'SMTP ready\r\n\r\n',
};

/** The requests as the server read them (head and body), by path. */
const received = new Map<string, string>();
let server: Server;
let base: string;
const net = new NetTransport();
const node = new NodeTransport();

function serve(socket: Socket): void {
  let data = '';
  socket.on('error', () => undefined);
  socket.on('data', (d: Buffer) => {
    data += d.toString('latin1');
    const end = data.indexOf('\r\n\r\n');
    if (end < 0) return;
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(data.slice(0, end))?.[1] ?? 0);
    if (data.length < end + 4 + length) return;
    const path = data.slice(data.indexOf(' ') + 1, data.indexOf(' HTTP/'));
    received.set(path, data);
    socket.end(ANSWERS[path] ?? 'HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
  });
}

beforeAll(async () => {
  server = createServer(serve);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(async () => {
  await net.close();
  await node.close();
  server.close();
});

type Outcome = { status: number; headers: TransportResponse['headers']; body: string } | { error: true; message?: string };

async function outcome(t: Transport, path: string, method = 'GET', headers: Record<string, string> = {}): Promise<Outcome> {
  try {
    const res = await t.request({ method, url: `${base}${path}`, headers });
    const body = await res.body.text();
    const { date: _d, connection: _c, 'keep-alive': _k, ...rest } = res.headers;
    return { status: res.status, headers: rest, body };
  } catch (err) {
    return { error: true, message: (err as Error).message };
  }
}

describe('NetTransport reads what NodeTransport reads', () => {
  it.each([
    ['/length', 200, 'hello'],
    ['/chunked', 200, 'hello world0123456789'],
    ['/close', 200, 'until the server closes'],
    ['/continue', 201, 'ok'],
    ['/no-content', 204, ''],
    ['/repeated', 404, '{}'],
  ])('%s: same status, headers and body', async (path, status, body) => {
    const [a, b] = [await outcome(net, path), await outcome(node, path)];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ status, body });
  });

  it('repeated headers: set-cookie as a list, others joined', async () => {
    const a = (await outcome(net, '/repeated')) as { headers: Record<string, unknown> };
    expect(a.headers['set-cookie']).toEqual(['a=1', 'b=2']);
    expect(a.headers['x-many']).toBe('one, two');
  });

  it('HEAD: no body whatever Content-Length says', async () => {
    const [a, b] = [await outcome(net, '/head', 'HEAD'), await outcome(node, '/head', 'HEAD')];
    expect(a).toEqual(b);
    expect(a).toMatchObject({ status: 200, body: '' });
  });

  it.each([
    ['/hang-up', 'socket hang up'],
    ['/short', 'aborted'],
    ['/bad-chunk', undefined],
    ['/not-http', undefined],
  ])('%s: both fail', async (path, message) => {
    const [a, b] = [await outcome(net, path), await outcome(node, path)];
    expect(a).toMatchObject({ error: true });
    expect(b).toMatchObject({ error: true });
    if (message) expect([(a as { message: string }).message, (b as { message: string }).message]).toEqual([message, message]);
  });

  it('refused connection: the same error code', async () => {
    const probe = createServer();
    probe.listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    const codes = await Promise.all(
      [net, node].map((t) => t.request({ method: 'GET', url: `http://127.0.0.1:${port}/`, headers: {} }).catch((e) => e.code)),
    );
    expect(codes).toEqual(['ECONNREFUSED', 'ECONNREFUSED']);
  });

  it('header names and values node:http refuses: the same errors, nothing sent', async () => {
    const cases: Array<Record<string, string>> = [{ 'x-api-key': 'a\nb' }, { 'bad name': 'x' }];
    for (const headers of cases) {
      const errors = await Promise.all(
        [net, node].map((t) =>
          t.request({ method: 'GET', url: `${base}/refused`, headers }).then(
            () => ['sent'],
            (e) => [e.code, e.message],
          ),
        ),
      );
      expect(errors[0]).toEqual(errors[1]);
      expect(errors[0]![0]).toMatch(/^ERR_INVALID_(CHAR|HTTP_TOKEN)$/);
    }
    expect(received.has('/refused')).toBe(false);
  });
});

describe('NetTransport requests', () => {
  it('one head with Host, Connection: close and the body length; the body after it', async () => {
    const res = await net.request({ method: 'POST', url: `${base}/post?q=1`, headers: { 'x-api-key': 'k' }, body: 'héllo' });
    await res.body.text();
    expect(received.get('/post?q=1')).toBe(
      `POST /post?q=1 HTTP/1.1\r\nHost: ${base.slice(7)}\r\nConnection: close\r\nx-api-key: k\r\nContent-Length: 6\r\n\r\n` +
        Buffer.from('héllo').toString('latin1'),
    );
  });

  it('an https URL goes through node:https: the server reads a TLS handshake, not a request line', async () => {
    const first = new Promise<Buffer>((resolve) => {
      const tls = createServer((sock) => {
        sock.once('data', (d: Buffer) => {
          resolve(d);
          sock.destroy();
          tls.close();
        });
      });
      tls.listen(0, '127.0.0.1', () => {
        const port = (tls.address() as { port: number }).port;
        void net.request({ method: 'GET', url: `https://127.0.0.1:${port}/x`, headers: {} }).catch(() => undefined);
      });
    });
    const bytes = await first;
    // A TLS record of type handshake (22), version 3.x: a ClientHello.
    expect([bytes[0], bytes[1]]).toEqual([0x16, 0x03]);
  });

  it('POST without a body says Content-Length: 0; GET says nothing', async () => {
    await (await net.request({ method: 'POST', url: `${base}/empty-post`, headers: {} })).body.text();
    await (await net.request({ method: 'GET', url: `${base}/get`, headers: {} })).body.text();
    expect(received.get('/empty-post')).toContain('\r\nContent-Length: 0\r\n');
    expect(received.get('/get')).not.toMatch(/content-length/i);
  });
});

describe('Http1Response framing', () => {
  /** A socket as the reader uses it (pause state only): bytes come through `feed`. */
  const socketLike = () => {
    let paused = false;
    return {
      pause: () => void (paused = true),
      resume: () => void (paused = false),
      isPaused: () => paused,
    } as unknown as Socket;
  };

  it('a chunked answer split at every byte boundary reads the same', async () => {
    const raw = Buffer.from(ANSWERS['/chunked']!, 'latin1');
    for (let cut = 1; cut < raw.length; cut++) {
      let done = 0;
      const res = new Http1Response(socketLike(), 'GET', () => done++);
      res.feed(raw.subarray(0, cut));
      res.feed(raw.subarray(cut));
      const answer = await res.head;
      expect(await answer.body.text(), `cut at ${cut}`).toBe('hello world0123456789');
      expect(done).toBe(1);
    }
  });

  it('byte by byte: Content-Length body, and bytes after it ignored', async () => {
    const raw = Buffer.from(`${ANSWERS['/length']}EXTRA`, 'latin1');
    const res = new Http1Response(socketLike(), 'GET', () => undefined);
    for (let i = 0; i < raw.length; i++) res.feed(raw.subarray(i, i + 1));
    const answer = await res.head;
    expect([answer.status, answer.headers['content-type'], await answer.body.text()]).toEqual([200, 'text/plain', 'hello']);
  });

  it('pauses the socket while more than 64 KiB wait unread, resumes once they are read', async () => {
    const socket = socketLike();
    const res = new Http1Response(socket, 'GET', () => undefined);
    res.feed(Buffer.from('HTTP/1.1 200 OK\r\nContent-Length: 240000\r\n\r\n'));
    const answer = await res.head;
    for (let i = 0; i < 5; i++) res.feed(Buffer.alloc(40_000, i));
    expect(socket.isPaused()).toBe(true);
    const it = answer.body[Symbol.asyncIterator]();
    let total = 0;
    while (total < 200_000) total += ((await it.next()).value as Uint8Array).byteLength;
    expect(socket.isPaused()).toBe(false);
    res.feed(Buffer.alloc(40_000, 9));
    for (let r = await it.next(); !r.done; r = await it.next()) total += r.value.byteLength;
    expect(total).toBe(240_000);
  });

  it('an answer head over 64 KiB fails', async () => {
    const res = new Http1Response(socketLike(), 'GET', () => undefined);
    res.feed(Buffer.from(`HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(70_000)}`));
    await expect(res.head).rejects.toMatchObject({ code: 'HPE_HEADER_OVERFLOW' });
  });
});
