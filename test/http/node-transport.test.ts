/**
 * The client's Node transports against a real node:http server on a real port: NodeTransport
 * (src/client/node-transport.ts, node:http) and NetTransport (src/client/net-transport.ts, the
 * `sbx exec` fast path's HTTP/1.1 on node:net) alike: whole bodies, chunked iteration,
 * back-pressure, a `break`, a server that dies mid-body, and cancellation by the request's signal
 * before and during the response. test/http/net-transport.test.ts covers NetTransport's framing.
 */
import { once } from 'node:events';
import { type IncomingMessage, type Server, type ServerResponse, createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { NetTransport } from '../../src/client/net-transport.js';
import { NodeTransport } from '../../src/client/node-transport.js';
import type { Transport } from '../../src/client/transport.js';

const MiB = 1024 * 1024;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);

/** Per path: what the server does. `written` counts body bytes the server managed to hand to its socket. */
let written = 0;
let closedEarly: Promise<unknown> = Promise.resolve();
function handle(req: IncomingMessage, res: ServerResponse): void {
  if (req.url === '/echo') {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => res.end(Buffer.concat(parts)));
    return;
  }
  if (req.url === '/big') {
    // Writes 64 MiB as fast as the reader takes it, counting what was accepted.
    written = 0;
    closedEarly = once(res, 'close');
    const pump = () => {
      while (written < 64 * MiB && !res.destroyed) {
        written += CHUNK.length;
        if (!res.write(CHUNK)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    pump();
    return;
  }
  if (req.url === '/die') {
    res.writeHead(200, { 'content-length': '1000' });
    res.write('partial');
    setTimeout(() => res.socket?.destroy(), 20);
    return;
  }
  if (req.url === '/slow') {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first');
    closedEarly = once(res, 'close');
    return; // never ends: only the client's abort stops it
  }
  if (req.url === '/hang') return; // no response at all
  res.end('?');
}

let server: Server;
let base: string;
const transports: Array<[string, Transport]> = [
  ['NodeTransport', new NodeTransport()],
  ['NetTransport', new NetTransport()],
];

beforeAll(async () => {
  server = createServer(handle);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  for (const [, t] of transports) await t.close?.();
  server.closeAllConnections();
  server.close();
});

describe.each(transports)('%s', (_name, transport) => {
  it('sends the body with its length and reads the whole answer (text and arrayBuffer)', async () => {
    const res = await transport.request({ method: 'POST', url: `${base}/echo`, headers: {}, body: 'héllo' });
    expect(res.status).toBe(200);
    expect(await res.body.text()).toBe('héllo');
    const bin = await transport.request({ method: 'POST', url: `${base}/echo`, headers: {}, body: new Uint8Array([0, 255, 7]) });
    expect([...new Uint8Array(await bin.body.arrayBuffer())]).toEqual([0, 255, 7]);
  });

  it('iterates a 64 MiB body whole, in chunks', async () => {
    const res = await transport.request({ method: 'GET', url: `${base}/big`, headers: {} });
    let total = 0;
    let chunks = 0;
    for await (const c of res.body) {
      total += c.byteLength;
      chunks++;
    }
    expect(total).toBe(64 * MiB);
    expect(chunks).toBeGreaterThan(1);
  });

  it('holds the sender back while the consumer does not read; a break frees the connection', async () => {
    const res = await transport.request({ method: 'GET', url: `${base}/big`, headers: {} });
    const it = res.body[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.done).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    // Socket and stream buffers hold a few MiB at most, nowhere near the 64 MiB body.
    expect(written).toBeLessThan(16 * MiB);
    await it.return?.();
    await closedEarly;
    expect(written).toBeLessThan(64 * MiB);
  });

  it('a server that dies mid-body fails the read (iteration and text), not a silent short body', async () => {
    const res = await transport.request({ method: 'GET', url: `${base}/die`, headers: {} });
    await expect(
      (async () => {
        for await (const _ of res.body) {
        }
      })(),
    ).rejects.toThrow(/aborted|premature/i);
    const res2 = await transport.request({ method: 'GET', url: `${base}/die`, headers: {} });
    await expect(res2.body.text()).rejects.toThrow(/aborted|premature/i);
  });

  it('a signal aborted before the request rejects with an AbortError carrying its reason', async () => {
    const ctl = new AbortController();
    const reason = new Error('stop now');
    ctl.abort(reason);
    const err = await transport.request({ method: 'GET', url: `${base}/echo`, headers: {}, signal: ctl.signal }).catch((e) => e);
    expect(err).toMatchObject({ name: 'AbortError', code: 'ABORT_ERR' });
    expect((err as Error).cause).toBe(reason);
  });

  it('aborting while waiting for the answer rejects the request', async () => {
    const ctl = new AbortController();
    const pending = transport.request({ method: 'GET', url: `${base}/hang`, headers: {}, signal: ctl.signal });
    setTimeout(() => ctl.abort(new Error('bored')), 50);
    const err = await pending.catch((e) => e);
    expect(err).toMatchObject({ name: 'AbortError' });
    expect((err as Error).cause).toEqual(new Error('bored'));
  });

  it('aborting during the body ends the iteration with an error and closes the server side', async () => {
    const ctl = new AbortController();
    const res = await transport.request({ method: 'GET', url: `${base}/slow`, headers: {}, signal: ctl.signal });
    const got: string[] = [];
    const reading = (async () => {
      for await (const c of res.body) {
        got.push(Buffer.from(c).toString());
        ctl.abort();
      }
    })();
    await expect(reading).rejects.toThrow();
    expect(got).toEqual(['first']);
    await closedEarly;
  });

  it('a signal that is never aborted leaves no listener behind once the body is read', async () => {
    const ctl = new AbortController();
    const added = vi.spyOn(ctl.signal, 'addEventListener');
    const removed = vi.spyOn(ctl.signal, 'removeEventListener');
    const res = await transport.request({ method: 'POST', url: `${base}/echo`, headers: {}, body: 'x', signal: ctl.signal });
    expect(await res.body.text()).toBe('x');
    await new Promise((r) => setImmediate(r));
    expect(added.mock.calls.map((c) => c[0])).toEqual(['abort']);
    expect(removed.mock.calls.map((c) => c[0])).toEqual(['abort']);
    expect(removed.mock.calls[0]![1]).toBe(added.mock.calls[0]![1]);
  });
});
