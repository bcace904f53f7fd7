/**
 * HTTP/2 in an intercepted tunnel (DESIGN.md §15; intercept.ts terminates the TLS): each client
 * stream, checked and rewritten (http-rewrite.ts), becomes a stream of one upstream session (made
 * again when it closes); bodies and trailers are piped both ways with HTTP/2's flow control.
 */
import {
  connect as h2Connect,
  constants as h2c,
  createServer as createH2Server,
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import type { TLSSocket } from 'node:tls';
import { forwardPairs, injectSecrets, strictRefusal, type HeaderPair } from './http-rewrite.js';
import type { TunnelCtx } from './intercept.js';

/** Serves the client's TLS socket (ALPN h2); `first` is the upstream connection already made (null: it could not be verified). */
export function serveH2(c: TunnelCtx, sock: TLSSocket, first: TLSSocket | null): void {
  const failed = first === null;
  let spare = first;
  let session: ClientHttp2Session | null = null;
  const upSession = (): ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const sock = spare ?? c.connectUp(['h2']);
    spare = null;
    const s = h2Connect(`https://${c.shown}:${c.port}`, { createConnection: () => sock });
    s.on('error', () => s.destroy());
    c.resources.add(s);
    session = s;
    return s;
  };
  const server = createH2Server();
  server.on('session', (s: ServerHttp2Session) => {
    c.resources.add(s);
    s.setTimeout(c.idleMs, () => s.destroy());
    s.on('error', () => s.destroy());
  });
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    forward(c, failed ? null : upSession, stream, headers).catch(() => h2Answer(stream, 502, 'sbx egress: the secrets are unavailable'));
  });
  server.emit('connection', sock);
}

function h2Answer(stream: ServerHttp2Stream, status: number, text: string): void {
  if (stream.headersSent || stream.destroyed) return void stream.close(h2c.NGHTTP2_INTERNAL_ERROR);
  stream.respond({ ':status': status, 'content-type': 'text/plain' });
  stream.end(`${text}\n`);
}

function h2Pairs(headers: IncomingHttpHeaders): HeaderPair[] {
  const out: HeaderPair[] = [];
  for (const [k, v] of Object.entries(headers)) {
    if (k.startsWith(':') || v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push([k, one]);
  }
  return out;
}

async function forward(
  c: TunnelCtx,
  upSession: (() => ClientHttp2Session) | null,
  stream: ServerHttp2Stream,
  headers: IncomingHttpHeaders,
): Promise<void> {
  const method = String(headers[':method'] ?? '');
  const path = String(headers[':path'] ?? '');
  const authority = headers[':authority'] === undefined ? undefined : String(headers[':authority']);
  if (method === 'CONNECT' || path === '') return h2Answer(stream, 405, 'sbx egress: CONNECT inside an intercepted tunnel is refused');
  const pairs = h2Pairs(headers);
  const refusal = strictRefusal(method, pairs, c.target, c.port, authority);
  if (refusal) return h2Answer(stream, refusal.status, refusal.text);
  if (!upSession) return h2Answer(stream, 502, `sbx egress: the upstream ${c.shown}:${c.port} could not be verified`);
  const rw = injectSecrets(pairs, path, await c.secrets(), c.target, c.port, false);
  if (stream.destroyed) return;
  if (!rw.ok) {
    c.onRefused();
    return h2Answer(stream, rw.refusal.status, rw.refusal.text);
  }
  if (rw.injected > 0) c.onInjected();
  const out: OutgoingHttpHeaders = {
    ':method': method,
    ':path': path,
    ':scheme': 'https',
    ':authority': authority ?? pairs.find(([k]) => k === 'host')![1],
  };
  const add = (k: string, v: string) => {
    const had = out[k];
    out[k] = had === undefined ? v : [...(Array.isArray(had) ? had : [String(had)]), v];
  };
  for (const [k, v] of forwardPairs(rw.pairs)) add(k.toLowerCase(), v);
  // gRPC needs `te: trailers`, the one TE value HTTP/2 allows.
  if (pairs.some(([k, v]) => k === 'te' && v.trim().toLowerCase() === 'trailers')) out.te = 'trailers';
  const up = upSession().request(out);
  let trailers: IncomingHttpHeaders | null = null;
  up.on('trailers', (t) => {
    trailers = t;
  });
  up.on('response', (h) => {
    const resHeaders: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(h)) if (v !== undefined && (k === ':status' || !k.startsWith(':'))) resHeaders[k] = v;
    stream.respond(resHeaders, { waitForTrailers: true });
    up.pipe(stream);
  });
  stream.on('wantTrailers', () => {
    const t: OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(trailers ?? {})) if (v !== undefined && !k.startsWith(':')) t[k] = v;
    stream.sendTrailers(t);
  });
  up.on('error', () => h2Answer(stream, 502, `sbx egress: the upstream ${c.shown}:${c.port} failed`));
  stream.on('close', () => {
    if (!up.closed) up.close(h2c.NGHTTP2_CANCEL);
  });
  stream.pipe(up);
}
