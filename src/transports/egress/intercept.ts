/**
 * Secrets injection in a CONNECT tunnel (DESIGN.md §15). For a tunnel to a host that one of the
 * sandbox's bound secrets names, the gateway — after its verdict and connect to an address that
 * passed, as for any tunnel — negotiates TLS with the upstream first (verified against the host's
 * trust store plus `providers.docker.egress_ca_file`, offering the protocols the client offered,
 * resuming an earlier session with that host when it has one), then terminates the client's TLS
 * with a leaf for exactly that host (its server context made once per leaf, so the client's own
 * sessions resume too), offering the protocol the upstream chose. Each request is checked strictly
 * and its placeholders replaced in header values (http-rewrite.ts); it goes on over the gateway's
 * own connection — HTTP/1.1 with keep-alive (intercept-h1.ts), or HTTP/2 on both sides
 * (intercept-h2.ts) — and bodies stream both ways untouched, with back-pressure. An upstream that
 * cannot be verified gets every request answered 502 (and a console line).
 */
import type { Socket } from 'node:net';
import { createSecureContext, DEFAULT_CIPHERS, connect as tlsConnect, type SecureContext, TLSSocket } from 'node:tls';
import { formatIp, ruleMatches, type Ip, type Target } from '../../core/network/index.js';
import type { BoundSecret, SecretSource } from '../../core/secrets/port.js';
import type { Hello } from './gateway-wire.js';
import { serveH1 } from './intercept-h1.js';
import { serveH2 } from './intercept-h2.js';

/** A leaf of the node's CA: its key and certificate chain (PEM). The CA returns the same object while it is valid. */
export interface LeafPem {
  keyPem: string;
  certPem: string;
}

/** The node's CA and the upstream trust, as compose gives them to the gateway. */
export interface InterceptTls {
  /** A leaf for exactly this host (cached per host by the CA). */
  leaf(host: { kind: 'name'; name: string } | { kind: 'ip'; address: string }): Promise<LeafPem>;
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
  /** The gateway's TLS sessions with upstreams, resumed by the next connection to the same host and address. */
  sessions: TlsSessions;
  idleMs: number;
  connectTimeoutMs: number;
  /** A request refused for a placeholder (`secret_not_allowed`). */
  onRefused(): void;
  /** A request went on with at least one value injected. */
  onInjected(): void;
  /** A line for the sandbox's console (never a value). */
  notice(line: string): void;
}

/** What the protocol halves of an intercepted tunnel share (intercept-h1.ts, intercept-h2.ts). */
export interface TunnelCtx extends InterceptHooks {
  target: Target;
  port: number;
  /** The host as requests name it and the upstream is verified for. */
  shown: string;
  /** Destroyed when the tunnel closes. */
  resources: Set<{ destroy(): void }>;
  /** A new TLS connection to the verdict's address (verified; a known session resumed). */
  connectUp(alpn: string[]): TLSSocket;
}

/** TLS sessions of the gateway with upstreams, by address, port and name; bounded. */
export class TlsSessions {
  private readonly map = new Map<string, Buffer>();
  constructor(private readonly max = 1024) {}
  get(key: string): Buffer | undefined {
    return this.map.get(key);
  }
  set(key: string, session: Buffer): void {
    this.map.delete(key);
    if (this.map.size >= this.max) this.map.delete(this.map.keys().next().value as string);
    this.map.set(key, session);
  }
}

const PROTOCOLS = ['h2', 'http/1.1'];
const HANDSHAKE_MS = 10_000;
/** Socket buffers of an intercepted tunnel: bodies move in large pieces, with fewer pauses for back-pressure. */
export const TUNNEL_HWM = 256 * 1024;

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

/**
 * The gateway's cipher order on both of its legs: Node's default list with AES-128-GCM (TLS 1.3's
 * mandatory suite) first, as the client-facing server's preference and the upstream's offer — it
 * costs a third less to encrypt than AES-256-GCM, and the gateway encrypts every byte twice.
 */
export const GATEWAY_CIPHERS = `TLS_AES_128_GCM_SHA256:${DEFAULT_CIPHERS.split(':')
  .filter((c) => c !== 'TLS_AES_128_GCM_SHA256')
  .join(':')}`;

/** Server contexts by leaf: made once per leaf (parsing its key is the costly part of a handshake's setup). */
const serverContexts = new WeakMap<LeafPem, SecureContext>();
function serverContext(leaf: LeafPem): SecureContext {
  let ctx = serverContexts.get(leaf);
  if (!ctx)
    serverContexts.set(
      leaf,
      (ctx = createSecureContext({ key: leaf.keyPem, cert: leaf.certPem, ciphers: GATEWAY_CIPHERS, honorCipherOrder: true })),
    );
  return ctx;
}

/** Serves the tunnel until either side ends; `close()` ends it at once. */
export function intercept(o: InterceptOptions): { close(): void } {
  const shown = o.target.kind === 'name' ? o.target.name : formatIp(o.target.ip);
  const sessionKey = `${formatIp(o.address)}|${o.port}|${shown}`;
  const upOpts = (alpn: string[]) => {
    const session = o.sessions.get(sessionKey);
    return {
      secureContext: o.tls.upstream,
      ALPNProtocols: alpn,
      rejectUnauthorized: true,
      highWaterMark: TUNNEL_HWM,
      ...(session ? { session } : {}),
      ...(o.target.kind === 'name' ? { servername: o.target.name } : {}),
    };
  };
  const keepSessions = (s: TLSSocket) => s.on('session', (session: Buffer) => o.sessions.set(sessionKey, session));
  const resources = new Set<{ destroy(): void }>([o.client, o.upstream]);
  const ctx: TunnelCtx = {
    ...o,
    shown,
    resources,
    connectUp: (alpn) => {
      const s = keepSessions(tlsConnect({ host: formatIp(o.address), port: o.port, ...upOpts(alpn) }));
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
      const alpn = offered.length > 0 ? offered : ['http/1.1'];
      up = await secure(keepSessions(tlsConnect({ socket: o.upstream, host: shown, ...upOpts(alpn) })), o.connectTimeoutMs);
      resources.add(up);
      up.setTimeout(o.idleMs, () => up?.destroy());
    } catch (err) {
      const code = (err as { code?: string }).code ?? 'TLS handshake failed';
      o.notice(`sbx egress: ${shown}:${o.port}: the upstream's certificate could not be verified (${code}); answering 502`);
    }
    const proto = up ? up.alpnProtocol || 'http/1.1' : offered.includes('http/1.1') || offered.length === 0 ? 'http/1.1' : 'h2';
    const leaf = await o.tls.leaf(o.target.kind === 'name' ? o.target : { kind: 'ip', address: shown });
    if (closed) return;
    // The ClientHello the gateway read goes back in front: the TLS socket reads it first.
    o.client.unshift(o.hello.bytes);
    const sock = new TLSSocket(o.client, {
      isServer: true,
      secureContext: serverContext(leaf),
      ...(o.hello.alpn.length > 0 ? { ALPNProtocols: [proto] } : {}),
      // Node passes it on to the socket's streams (not in the option's type).
      ...({ highWaterMark: TUNNEL_HWM } as object),
    });
    resources.add(sock);
    const timer = setTimeout(() => sock.destroy(), HANDSHAKE_MS);
    sock.on('error', close);
    sock.once('close', () => {
      clearTimeout(timer);
      close();
    });
    // The HTTP server takes the socket once its handshake is done, as a TLS server hands it over.
    sock.once('secure', () => {
      clearTimeout(timer);
      // As a TLS server does before handing a socket over (HTTP/2 waits for `secureConnect` while it is set).
      (sock as { secureConnecting?: boolean }).secureConnecting = false;
      if (proto === 'h2') serveH2(ctx, sock, up);
      else serveH1(ctx, sock, up);
    });
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
