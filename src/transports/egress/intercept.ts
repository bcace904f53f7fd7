/**
 * Secrets injection in a CONNECT tunnel (DESIGN.md §15). For a tunnel to a host that one of the
 * sandbox's bound secrets names, the gateway — after its verdict and connect to an address that
 * passed, as for any tunnel — negotiates TLS with the upstream first (verified against the host's
 * trust store plus `providers.docker.egress_ca_file`, offering the protocols the client offered),
 * then terminates the client's TLS with a leaf for exactly that host, offering the protocol the
 * upstream chose. Each request is checked strictly and its placeholders replaced in header values
 * (http-rewrite.ts); it goes on over the gateway's own connection — HTTP/1.1 with keep-alive, or
 * HTTP/2 on both sides — and bodies stream both ways untouched, with back-pressure. An upstream
 * that cannot be verified gets every request answered 502 (and a console line).
 */
import { Agent, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import {
  connect as h2Connect,
  constants as h2c,
  createSecureServer as createH2SecureServer,
  type ClientHttp2Session,
  type IncomingHttpHeaders,
  type OutgoingHttpHeaders,
  type ServerHttp2Session,
  type ServerHttp2Stream,
} from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { connect as tlsConnect, type SecureContext, type Server as TlsServer, type TLSSocket, type TlsOptions } from 'node:tls';
import { formatIp, ruleMatches, type Ip, type Target } from '../../core/network/index.js';
import type { BoundSecret, SecretSource } from '../../core/secrets/port.js';
import type { Hello } from './gateway-wire.js';
import { forwardPairs, injectSecrets, pairsOf, strictRefusal, type HeaderPair } from './http-rewrite.js';

/** The node's CA and the upstream trust, as compose gives them to the gateway. */
export interface InterceptTls {
  /** A server context with a leaf for exactly this host (cached per host by the CA). */
  leaf(host: { kind: 'name'; name: string } | { kind: 'ip'; address: string }): Promise<{ keyPem: string; certPem: string }>;
  /** Client context holding the certificates an upstream is verified against. */
  upstream: SecureContext;
}

export interface InterceptOptions extends InterceptHooks {
  client: Socket;
  hello: Hello;
  /** The TCP connection to `address`, which the gateway's verdict passed. */
  upstream: Socket;
  address: Ip;
  target: Target;
  port: number;
}

/** What the gateway gives an intercepted tunnel besides its sockets. */
export interface InterceptHooks {
  /** The sandbox's bound secrets now (read per request: rotation and deletion apply to the next one); throws when unknown. */
  secrets(): Promise<readonly BoundSecret[]>;
  tls: InterceptTls;
  idleMs: number;
  connectTimeoutMs: number;
  /** A request refused for a placeholder (`secret_not_allowed`). */
  onRefused(): void;
  /** A request went on with at least one value injected. */
  onInjected(): void;
  /** A line for the sandbox's console (never a value). */
  notice(line: string): void;
}

const PROTOCOLS = ['h2', 'http/1.1'];

/**
 * The sandbox's secrets when one of them names host:port: the tunnel is intercepted. Null: none
 * does (or no source), a plain tunnel. `unavailable`: the source could not tell (fails closed).
 */
export async function secretsNaming(
  source: SecretSource | undefined,
  sandboxId: string,
  target: Target,
  port: number,
): Promise<readonly BoundSecret[] | null | 'unavailable'> {
  if (!source) return null;
  try {
    const all = await source.forSandbox(sandboxId);
    return all.some((s) => s.hosts.some((r) => ruleMatches(r, target, port))) ? all : null;
  } catch {
    return 'unavailable';
  }
}
const HANDSHAKE_MS = 10_000;

type Ctx = InterceptOptions & { shown: string; connectUp(alpn: string[]): TLSSocket };

/** Serves the tunnel until either side ends; `close()` ends it at once. */
export function intercept(o: InterceptOptions): { close(): void } {
  const shown = o.target.kind === 'name' ? o.target.name : formatIp(o.target.ip);
  const tlsOpts = (alpn: string[]) => ({
    secureContext: o.tls.upstream,
    ALPNProtocols: alpn,
    rejectUnauthorized: true,
    ...(o.target.kind === 'name' ? { servername: o.target.name } : {}),
  });
  const resources = new Set<{ destroy(): void }>([o.client, o.upstream]);
  const ctx: Ctx = {
    ...o,
    shown,
    connectUp: (alpn) => {
      const s = tlsConnect({ host: formatIp(o.address), port: o.port, ...tlsOpts(alpn) });
      s.setTimeout(o.idleMs, () => s.destroy());
      resources.add(s);
      s.once('close', () => resources.delete(s));
      return s;
    },
  };
  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    for (const r of resources) r.destroy();
  };
  o.client.once('close', close);
  void (async () => {
    const offered = o.hello.alpn.filter((p) => PROTOCOLS.includes(p));
    let up: TLSSocket | null = null;
    try {
      up = await secure(
        tlsConnect({ socket: o.upstream, host: shown, ...tlsOpts(offered.length > 0 ? offered : ['http/1.1']) }),
        o.connectTimeoutMs,
      );
      resources.add(up);
      up.setTimeout(o.idleMs, () => up?.destroy());
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'TLS handshake failed';
      o.notice(`sbx egress: ${shown}:${o.port}: the upstream's certificate could not be verified (${code}); answering 502`);
    }
    const proto = up ? up.alpnProtocol || 'http/1.1' : offered.includes('http/1.1') || offered.length === 0 ? 'http/1.1' : 'h2';
    const leaf = await o.tls.leaf(o.target.kind === 'name' ? o.target : { kind: 'ip', address: shown });
    if (closed) return;
    const tlsOptions: TlsOptions = {
      key: leaf.keyPem,
      cert: leaf.certPem,
      handshakeTimeout: HANDSHAKE_MS,
      ...(o.hello.alpn.length > 0 ? { ALPNProtocols: [proto] } : {}),
    };
    // A server of its own for this one connection (tls.Server does the handshake and hands the
    // session its socket at once; a hand-made TLSSocket would leave HTTP/2's first frames behind).
    const server = proto === 'h2' ? serveH2(ctx, tlsOptions, up, resources) : serveH1(ctx, tlsOptions, up, resources);
    server.on('secureConnection', (sock: TLSSocket) => {
      resources.add(sock);
      sock.on('error', close);
      sock.once('close', close);
    });
    server.on('tlsClientError', close);
    // The ClientHello the gateway read goes back in front: the server's TLS socket reads it first.
    o.client.unshift(o.hello.bytes);
    server.emit('connection', o.client);
  })().catch(close);
  return { close };
}

/** Resolves once the TLS handshake is done (bounded); rejects with the TLS error. */
function secure(s: TLSSocket, ms: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => s.destroy(Object.assign(new Error('TLS handshake timed out'), { code: 'ETIMEDOUT' })), ms);
    const fail = (err: Error) => {
      clearTimeout(timer);
      s.destroy();
      reject(err);
    };
    s.once('error', fail);
    s.once('secureConnect', () => {
      clearTimeout(timer);
      s.removeListener('error', fail);
      s.on('error', () => s.destroy());
      resolve(s);
    });
  });
}

const flat = (pairs: readonly HeaderPair[]) => pairs.flat();

function plainAnswer(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return void res.destroy();
  res.shouldKeepAlive = false;
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close', 'content-length': Buffer.byteLength(text) + 1 });
  res.end(`${text}\n`);
}

/** HTTP/1.1: the client's requests, one at a time, over one upstream connection kept alive (another to the same address when it closes). */
function serveH1(c: Ctx, tlsOptions: TlsOptions, first: TLSSocket | null, resources: Set<{ destroy(): void }>): TlsServer {
  let spare = first;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  resources.add(agent);
  (agent as unknown as { createConnection: () => Socket }).createConnection = () => {
    const s = spare ?? c.connectUp(['http/1.1']);
    spare = null;
    return s;
  };
  const server = createHttpsServer({ ...tlsOptions, requestTimeout: 0, headersTimeout: 30_000, keepAliveTimeout: c.idleMs });
  server.setTimeout(c.idleMs);
  server.on(
    'request',
    (req: IncomingMessage, res: ServerResponse) =>
      void forwardH1(c, agent, first === null, req, res).catch(() => plainAnswer(res, 502, 'sbx egress: the secrets are unavailable')),
  );
  server.on('clientError', (_err, s: Socket) => {
    if (s.writable) s.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else s.destroy();
  });
  return server;
}

async function forwardH1(c: Ctx, agent: Agent, failed: boolean, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const pairs = pairsOf(req.rawHeaders);
  const refusal = strictRefusal(req.method ?? '', pairs, c.target, c.port);
  if (refusal) return plainAnswer(res, refusal.status, refusal.text);
  if (failed) return plainAnswer(res, 502, `sbx egress: the upstream ${c.shown}:${c.port} could not be verified`);
  const url = req.url ?? '/';
  const rw = injectSecrets(pairs, url, await c.secrets(), c.target, c.port, false);
  if (!rw.ok) {
    c.onRefused();
    return plainAnswer(res, rw.refusal.status, rw.refusal.text);
  }
  if (rw.injected > 0) c.onInjected();
  const host = pairs.find(([k]) => k.toLowerCase() === 'host')!;
  const upstream = httpRequest({
    agent,
    host: c.shown,
    port: c.port,
    method: req.method,
    path: url,
    setHost: false,
    headers: flat([['Host', host[1]], ...forwardPairs(rw.pairs)]) as unknown as Record<string, string>,
  });
  upstream.on('response', (ures) => {
    res.writeHead(
      ures.statusCode ?? 502,
      ures.statusMessage,
      flat(forwardPairs(pairsOf(ures.rawHeaders))) as unknown as Record<string, string>,
    );
    ures.pipe(res);
  });
  upstream.on('error', () => plainAnswer(res, 502, `sbx egress: the upstream ${c.shown}:${c.port} failed`));
  res.once('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}

/** HTTP/2: each client stream becomes a stream of one upstream session (made again when it closes). */
function serveH2(c: Ctx, tlsOptions: TlsOptions, first: TLSSocket | null, resources: Set<{ destroy(): void }>): TlsServer {
  const failed = first === null;
  let spare = first;
  let session: ClientHttp2Session | null = null;
  const upSession = (): ClientHttp2Session => {
    if (session && !session.closed && !session.destroyed) return session;
    const sock = spare ?? c.connectUp(['h2']);
    spare = null;
    const s = h2Connect(`https://${c.shown}:${c.port}`, { createConnection: () => sock });
    s.on('error', () => s.destroy());
    resources.add(s);
    session = s;
    return s;
  };
  const server = createH2SecureServer(tlsOptions);
  server.on('session', (s: ServerHttp2Session) => {
    resources.add(s);
    s.setTimeout(c.idleMs, () => s.destroy());
    s.on('error', () => s.destroy());
  });
  server.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => {
    forwardH2(c, failed ? null : upSession, stream, headers).catch(() => h2Answer(stream, 502, 'sbx egress: the secrets are unavailable'));
  });
  return server;
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

async function forwardH2(
  c: Ctx,
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
