/**
 * The preview reverse proxy (DESIGN.md §9): one request or one WebSocket upgrade forwarded to a
 * sandbox port, bodies streamed both ways with backpressure (a large download is never held),
 * hop-by-hop headers dropped, `X-Forwarded-*` set. Errors before the first response byte are the
 * JSON `{code, message}` body; after it the connection is cut (a truncated body, never a forged end).
 */
import http, { type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { pipeline } from 'node:stream';
import type { PreviewUpstream } from '../../../core/ports/index.js';

/** Counters of preview traffic (metrics `sbx_preview_*`). */
export interface PreviewStats {
  requests: number;
  upgrades: number;
  upstream_errors: number;
  /** Request bytes sent to sandboxes. */
  bytes_in: number;
  /** Response bytes sent to visitors. */
  bytes_out: number;
}

export const newPreviewStats = (): PreviewStats => ({ requests: 0, upgrades: 0, upstream_errors: 0, bytes_in: 0, bytes_out: 0 });

/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'http2-settings',
]);
const CONNECT_TIMEOUT_MS = 10_000;
/** A preview connection silent this long is closed (long polls and quiet sockets still get minutes). */
const IDLE_TIMEOUT_MS = 10 * 60_000;

const agents = {
  http: new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: IDLE_TIMEOUT_MS }),
  https: new https.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 64, timeout: IDLE_TIMEOUT_MS }),
};

export interface ForwardOptions {
  /** Path and query sent upstream (after any `path_prefix`). */
  path: string;
  /** Request headers that must not reach the sandbox (API credentials, the preview token). */
  drop: (name: string, value: string) => boolean;
  /** Cookie names removed from the `Cookie` header. */
  dropCookies?: readonly string[];
  stats: PreviewStats;
  /** How the visitor reached us, for `X-Forwarded-Proto`. */
  proto: 'http' | 'https';
  /** Names the sandbox and port in error messages. */
  what: string;
}

/** The visitor's headers as the sandbox gets them. */
function forwardedHeaders(req: IncomingMessage, upstream: PreviewUpstream, opts: ForwardOptions): OutgoingHttpHeaders {
  const connectionTokens = new Set(
    String(req.headers.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string | string[]> = {};
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    let value = raw[i + 1]!;
    if (HOP_BY_HOP.has(name) || connectionTokens.has(name) || name.startsWith('x-forwarded-') || name === 'forwarded') continue;
    if (opts.drop(name, value)) continue;
    if (name === 'cookie' && opts.dropCookies?.length) {
      value = stripCookies(value, opts.dropCookies);
      if (value === '') continue;
    }
    const prev = out[name];
    if (prev === undefined) out[name] = value;
    else if (name === 'cookie') out[name] = `${prev as string}; ${value}`;
    else out[name] = Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  const host = req.headers.host ?? '';
  out['x-forwarded-for'] = req.socket.remoteAddress ?? '';
  out['x-forwarded-proto'] = opts.proto;
  out['x-forwarded-host'] = host;
  for (const [k, v] of Object.entries(upstream.headers ?? {})) out[k.toLowerCase()] = v;
  return out;
}

function stripCookies(header: string, names: readonly string[]): string {
  return header
    .split(';')
    .map((c) => c.trim())
    .filter((c) => c !== '' && !names.includes(c.slice(0, Math.max(0, c.indexOf('='))).trim()))
    .join('; ');
}

/** Response headers as the visitor gets them (hop-by-hop dropped). */
function responseHeaders(res: IncomingMessage): Array<[string, string]> {
  const connectionTokens = new Set(
    String(res.headers.connection ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase()),
  );
  const out: Array<[string, string]> = [];
  const raw = res.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || connectionTokens.has(name)) continue;
    out.push([raw[i]!, raw[i + 1]!]);
  }
  return out;
}

function requestOptions(
  upstream: PreviewUpstream,
  method: string,
  path: string,
  headers: OutgoingHttpHeaders,
  agent: boolean,
): http.RequestOptions & https.RequestOptions {
  const o: http.RequestOptions & https.RequestOptions = {
    host: upstream.host,
    port: upstream.port,
    method,
    path: `${upstream.path_prefix ?? ''}${path}`,
    headers,
    setHost: false,
    timeout: IDLE_TIMEOUT_MS,
  };
  if (upstream.tls) {
    const t = upstream.tls;
    if (t.ca) o.ca = Buffer.from(t.ca);
    if (t.cert) o.cert = Buffer.from(t.cert);
    if (t.key) o.key = Buffer.from(t.key);
    if (t.servername) o.servername = t.servername;
    o.rejectUnauthorized = t.rejectUnauthorized;
  }
  // Connections to a worker (our own server, sound keep-alive) are pooled; to a sandbox's server
  // never: an arbitrary server may close an idle connection as it is reused, losing the request.
  o.agent = agent && upstream.path_prefix !== undefined ? (upstream.tls ? agents.https : agents.http) : false;
  return o;
}

/** `{code, message}` as the answer, unless a response already started (then the connection is cut). */
export function sendPreviewError(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ code, message });
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
  });
  res.end(body);
}

function upstreamFailure(err: NodeJS.ErrnoException, what: string): { status: number; code: string; message: string } {
  if (err.code === 'ECONNREFUSED') return { status: 502, code: 'bad_gateway', message: `nothing is listening on ${what}` };
  if (err.code === 'SBX_CONNECT_TIMEOUT')
    return { status: 502, code: 'bad_gateway', message: `${what} did not accept the connection in time` };
  if (err.code === 'EHOSTUNREACH' || err.code === 'ENETUNREACH')
    return { status: 502, code: 'bad_gateway', message: `${what} cannot be reached` };
  return { status: 502, code: 'bad_gateway', message: `${what} closed the connection without an answer` };
}

/** Cuts a request that did not get its socket connected in time. */
function connectDeadline(out: http.ClientRequest): void {
  const timer = setTimeout(
    () => out.destroy(Object.assign(new Error('connect timeout'), { code: 'SBX_CONNECT_TIMEOUT' })),
    CONNECT_TIMEOUT_MS,
  );
  timer.unref();
  out.once('socket', (s: Socket) => {
    if (!s.connecting) return clearTimeout(timer);
    s.once('connect', () => clearTimeout(timer));
    s.once('secureConnect', () => clearTimeout(timer));
  });
  out.once('close', () => clearTimeout(timer));
  out.once('response', () => clearTimeout(timer));
}

/**
 * Counts the bytes of one exchange on the upstream socket (what it read and wrote while this
 * request had it), not per chunk: no listener on the body's hot path.
 */
function countBytes(out: http.ClientRequest, stats: PreviewStats): void {
  out.once('socket', (s: Socket) => {
    const read0 = s.bytesRead;
    const written0 = s.bytesWritten;
    out.once('close', () => {
      stats.bytes_out += s.bytesRead - read0;
      stats.bytes_in += s.bytesWritten - written0;
    });
  });
}

/** Forwards one HTTP request; resolves when the exchange is over either way. */
export function forwardRequest(req: IncomingMessage, res: ServerResponse, upstream: PreviewUpstream, opts: ForwardOptions): void {
  const { stats } = opts;
  stats.requests++;
  const out = (upstream.tls ? https : http).request(
    requestOptions(upstream, req.method ?? 'GET', opts.path, forwardedHeaders(req, upstream, opts), true),
  );
  connectDeadline(out);
  out.on('timeout', () => out.destroy(Object.assign(new Error('idle'), { code: 'ETIMEDOUT' })));
  countBytes(out, stats);
  out.on('response', (ur) => {
    res.writeHead(ur.statusCode ?? 502, ur.statusMessage, responseHeaders(ur).flat());
    pipeline(ur, res, (err) => {
      if (err) res.destroy();
    });
  });
  out.on('error', (err: NodeJS.ErrnoException) => {
    stats.upstream_errors++;
    const f = upstreamFailure(err, opts.what);
    sendPreviewError(res, f.status, f.code, f.message);
  });
  // The visitor went away: the sandbox's side is closed too.
  res.on('close', () => {
    if (!res.writableFinished) out.destroy();
  });
  pipeline(req, out, () => undefined);
}

/** Forwards a WebSocket (or any) upgrade; the two sockets are then spliced. */
export function forwardUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, upstream: PreviewUpstream, opts: ForwardOptions): void {
  const { stats } = opts;
  stats.upgrades++;
  const headers = forwardedHeaders(req, upstream, opts);
  headers.connection = 'Upgrade';
  headers.upgrade = req.headers.upgrade ?? 'websocket';
  const out = (upstream.tls ? https : http).request(requestOptions(upstream, req.method ?? 'GET', opts.path, headers, false));
  connectDeadline(out);
  socket.on('error', () => out.destroy());
  out.on('upgrade', (ur, usock: Socket, uhead: Buffer) => {
    let text = `HTTP/1.1 ${ur.statusCode ?? 101} ${ur.statusMessage ?? 'Switching Protocols'}\r\n`;
    const raw = ur.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) text += `${raw[i]}: ${raw[i + 1]}\r\n`;
    socket.write(`${text}\r\n`);
    if (uhead.length > 0) socket.write(uhead);
    if (head.length > 0) usock.write(head);
    usock.setTimeout(0);
    socket.setTimeout(IDLE_TIMEOUT_MS, () => socket.destroy());
    usock.on('data', (c: Buffer) => (stats.bytes_out += c.byteLength));
    socket.on('data', (c: Buffer) => (stats.bytes_in += c.byteLength));
    pipeline(usock, socket, () => usock.destroy());
    pipeline(socket, usock, () => socket.destroy());
  });
  // The sandbox answered without upgrading: that answer is relayed, then the connection closes.
  out.on('response', (ur) => {
    let text = `HTTP/1.1 ${ur.statusCode ?? 502} ${ur.statusMessage ?? ''}\r\n`;
    for (const [k, v] of responseHeaders(ur)) text += `${k}: ${v}\r\n`;
    socket.write(`${text}connection: close\r\n\r\n`);
    pipeline(ur, socket, () => socket.destroy());
  });
  out.on('error', (err: NodeJS.ErrnoException) => {
    stats.upstream_errors++;
    const f = upstreamFailure(err, opts.what);
    writeRawError(socket, f.status, f.code, f.message);
  });
  out.end();
}

/** An error answer written straight to a socket (upgrades have no ServerResponse). */
export function writeRawError(socket: Socket, status: number, code: string, message: string, extra: Record<string, string> = {}): void {
  if (!socket.writable) return void socket.destroy();
  const body = JSON.stringify({ code, message });
  let head =
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\ncontent-type: application/json; ` +
    `charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n`;
  for (const [k, v] of Object.entries(extra)) head += `${k}: ${v}\r\n`;
  socket.end(`${head}\r\n${body}`);
}
