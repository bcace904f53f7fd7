/**
 * A minimal HTTP/1.1 transport on node:net, for the `sbx exec` fast path (transports/cli/fast-exec.ts,
 * issue 33): loading node:http and building its ClientRequest, Agent and socket cost a CLI process
 * more than the exec itself. One connection per request (`Connection: close`, so nothing is left
 * open for the process to wait on); the request is one write (head, `Content-Length` body); the
 * answer is read by http1-response.ts (Content-Length, chunked, or until close; paused while the
 * consumer lags). Errors are node:http's: the socket's own (ECONNREFUSED…), `socket hang up`
 * before an answer, the same messages for headers node:http refuses, the same AbortError, and the
 * same 10 s deadline to connect. https: URLs go through NodeTransport (node:https) as before.
 */
import { connect, type Socket } from 'node:net';
import { Http1Response } from './http1-response.js';
import { abortError, NodeTransport } from './node-transport.js';
import type { Transport, TransportRequest, TransportResponse } from './transport.js';

const CONNECT_TIMEOUT_MS = 10_000;
/** Methods node:http sends without `Content-Length: 0` when they have no body. */
const NO_BODY_METHODS = new Set(['GET', 'HEAD', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

export class NetTransport implements Transport {
  readonly userAgent = 'sbx-cli';
  private readonly open = new Set<Socket>();
  private https?: NodeTransport;

  async request(req: TransportRequest): Promise<TransportResponse> {
    const url = new URL(req.url);
    if (url.protocol !== 'http:') {
      this.https ??= new NodeTransport();
      return this.https.request(req);
    }
    const head = requestHead(req, url);
    const { signal } = req;
    if (signal?.aborted) throw abortError(signal.reason);
    const socket = connect({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) });
    this.open.add(socket);
    const timer = setTimeout(
      () => socket.destroy(Object.assign(new Error('connection timed out'), { code: 'ETIMEDOUT' })),
      CONNECT_TIMEOUT_MS,
    );
    const onAbort = () => {
      res.fail(abortError(signal!.reason));
      socket.destroy();
    };
    const res = new Http1Response(socket, req.method, () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      this.open.delete(socket);
      socket.destroy();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => clearTimeout(timer));
    socket.on('data', (d: Buffer) => res.feed(d));
    socket.once('end', () => res.end());
    socket.on('error', (err: Error) => res.fail(err));
    socket.once('close', () => res.end());
    socket.setNoDelay(true);
    writeRequest(socket, head, req.body);
    return res.head;
  }

  async close(): Promise<void> {
    for (const socket of this.open) socket.destroy();
    this.open.clear();
    await this.https?.close();
  }
}

/** Request line and headers as node:http writes them (its checks and messages for bad names and values). */
function requestHead(req: TransportRequest, url: URL): string {
  let head = `${req.method} ${url.pathname}${url.search} HTTP/1.1\r\nHost: ${url.host}\r\nConnection: close\r\n`;
  let length = false;
  for (const [name, value] of Object.entries(req.headers)) {
    if (!TOKEN.test(name)) throw codeError(TypeError, `Header name must be a valid HTTP token ["${name}"]`, 'ERR_INVALID_HTTP_TOKEN');
    if (BAD_VALUE.test(value)) throw codeError(TypeError, `Invalid character in header content ["${name}"]`, 'ERR_INVALID_CHAR');
    if (name.toLowerCase() === 'content-length') length = true;
    head += `${name}: ${value}\r\n`;
  }
  if (!length) {
    if (req.body !== undefined) {
      head += `Content-Length: ${typeof req.body === 'string' ? Buffer.byteLength(req.body) : req.body.byteLength}\r\n`;
    } else if (!NO_BODY_METHODS.has(req.method)) head += 'Content-Length: 0\r\n';
  }
  return `${head}\r\n`;
}

/** Head and body in one write when the body is small (one packet), else two. */
function writeRequest(socket: Socket, head: string, body: string | Uint8Array | undefined): void {
  const start = Buffer.from(head, 'latin1');
  if (body === undefined) socket.write(start);
  else if (typeof body === 'string' || body.byteLength <= 64 * 1024) socket.write(Buffer.concat([start, Buffer.from(body)]));
  else {
    socket.write(start);
    socket.write(body);
  }
}

function codeError(Kind: ErrorConstructor, message: string, code: string): Error {
  return Object.assign(new Kind(message), { code });
}
