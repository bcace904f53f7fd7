import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { parseTarget, type DenyReason, type EgressLists, type Ip } from '../../core/network/index.js';
import type { SecretSource } from '../../core/secrets/port.js';
import { Verdicts, type Judgeable } from './gateway-verdicts.js';
import { connectFirst, deny, normalizeSource, readHello, refuseTunnel, splitAuthority, type Hello } from './gateway-wire.js';
import { readResponseHead, relay, relayAnswer, requestHead, sendBody, UpstreamReads } from './http-relay.js';
import { plainHeaders } from './http-rewrite.js';
import { intercept, secretsNaming, TlsSessions, type InterceptHooks, type InterceptTls } from './intercept.js';
import { hostResolver } from './resolver.js';

/**
 * The egress gateway (DESIGN.md §10): what filtered sandboxes reach instead of the network. An
 * HTTP proxy for absolute-form requests (each judged; `Host` rewritten from the URI) and CONNECT
 * (judged; unless the matching rule names the port, the first bytes must be a TLS ClientHello
 * whose SNI equals the CONNECT host; a host one of the sandbox's secrets names is intercepted:
 * intercept.ts). It knows the sandbox by the source address and judges with gateway-verdicts.ts
 * (lists per connection, names resolved by itself, only passing addresses). Malformed input gets 400 and the
 * gateway stays up; more than 256 connections from one sandbox get 503; idle tunnels close after
 * 10 minutes.
 */
export interface VerdictRecord {
  sandbox_id: string | null;
  host: string;
  port: number;
  verdict: 'allowed' | 'denied';
  reason?: DenyReason;
}

export interface GatewayOptions {
  host: string;
  port: number;
  /** The sandbox a source address belongs to; null: unknown (denied). */
  sandboxFor(address: string): Promise<string | null>;
  /** A sandbox's current lists; null when it is not (or no longer) filtered: everything denied. */
  rules(sandboxId: string): Promise<EgressLists | null>;
  /**
   * A sandbox's bound secrets and their current values (DESIGN.md §15): the control plane's store, or
   * on a worker its fetch from the control plane. Cached ≤ 1 s by the source; throws when it cannot tell.
   */
  secrets?: SecretSource;
  /** This node's own addresses (special: refused unless an allow CIDR names them). */
  ownAddresses?(): string[];
  /** Name → addresses, in order (tests inject one); default: the hosts file, then a node:dns Resolver (A then AAAA, 5 s). */
  resolve?(name: string): Promise<string[]>;
  onVerdict?(v: VerdictRecord): void;
  maxConnectionsPerSandbox?: number;
  idleMs?: number;
  /** Lookups in flight per sandbox (more → denied with `limit`). */
  maxLookups?: number;
  connectTimeoutMs?: number;
  /** The node's CA (leaves) and the trust upstreams are verified against. */
  interception?: InterceptTls;
  /** A request went on with a secret's value injected (`sbx_egress_secret_injections_total`). */
  onInjection?(sandboxId: string): void;
  /** A line for a sandbox's console (an upstream that could not be verified). */
  onNotice?(sandboxId: string, line: string): void;
}

interface Open extends Judgeable {
  close(): void;
}

export class EgressGateway {
  private server: Server | null = null;
  private readonly perSource = new Map<string, number>();
  private readonly open = new Map<string, Set<Open>>();
  private readonly sockets = new Set<Socket>();
  /** Client sockets a request was taken from: their one answer closes them (a relayed one is raw bytes). */
  private readonly taken = new WeakSet<Socket>();
  private readonly verdicts: Verdicts;
  /** TLS sessions with upstreams of intercepted tunnels, resumed by the next tunnel to the same host. */
  private readonly sessions = new TlsSessions();
  private readonly max: number;
  private readonly idleMs: number;
  private readonly connectTimeoutMs: number;

  constructor(private readonly opts: GatewayOptions) {
    this.verdicts = new Verdicts({
      rules: opts.rules,
      resolve: opts.resolve ?? hostResolver(),
      maxLookups: opts.maxLookups ?? 8,
      ...(opts.ownAddresses ? { ownAddresses: opts.ownAddresses } : {}),
    });
    this.max = opts.maxConnectionsPerSandbox ?? 256;
    this.idleMs = opts.idleMs ?? 10 * 60_000;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
  }

  async start(): Promise<void> {
    const server = createServer({ requestTimeout: 0, headersTimeout: 30_000, keepAliveTimeout: 5_000 });
    server.on('connection', (sock: Socket) => this.accept(sock));
    server.on('request', (req: IncomingMessage, res: ServerResponse) => void this.proxy(req, res).catch(() => res.destroy()));
    server.on(
      'connect',
      (req: IncomingMessage, sock: Socket, head: Buffer) => void this.tunnel(req, sock, head).catch(() => sock.destroy()),
    );
    server.on('clientError', (_err, sock: Socket) => {
      if (sock.writable) sock.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      else sock.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => resolve());
    });
    this.server = server;
  }

  /** The port it listens on (useful with port 0). */
  get port(): number {
    const a = this.server?.address();
    return a && typeof a === 'object' ? a.port : this.opts.port;
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    for (const set of this.open.values()) for (const o of set) o.close();
    const server = this.server;
    this.server = null;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /**
   * A sandbox's lists changed: the cache forgets them and every open connection and tunnel of it
   * is judged again; what the new lists no longer allow is closed.
   */
  async changed(sandboxId: string): Promise<void> {
    this.verdicts.forget(sandboxId);
    const set = this.open.get(sandboxId);
    if (!set || set.size === 0) return;
    const lists = await this.verdicts.lists(sandboxId);
    for (const o of [...set]) if (!this.verdicts.stillAllowed(o, lists)) o.close();
  }

  private accept(sock: Socket): void {
    const source = normalizeSource(sock.remoteAddress ?? '');
    this.sockets.add(sock);
    const n = (this.perSource.get(source) ?? 0) + 1;
    this.perSource.set(source, n);
    sock.once('close', () => {
      this.sockets.delete(sock);
      const left = (this.perSource.get(source) ?? 1) - 1;
      if (left <= 0) this.perSource.delete(source);
      else this.perSource.set(source, left);
    });
    sock.on('error', () => sock.destroy());
    if (n > this.max) {
      sock.end(
        'HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ' +
          '47\r\n\r\nsbx egress: too many connections from sandbox\r\n',
      );
      void this.opts
        .sandboxFor(source)
        .then((id) => this.record(id, '', 0, 'limit'))
        .catch(() => undefined);
    }
  }

  private record(sandboxId: string | null, host: string, port: number, reason?: DenyReason): void {
    try {
      this.opts.onVerdict?.({ sandbox_id: sandboxId, host, port, verdict: reason ? 'denied' : 'allowed', ...(reason ? { reason } : {}) });
    } catch {
      // Observers never break the gateway.
    }
  }

  /** What an intercepted tunnel of this sandbox reports through and reads from. */
  private hooks(sandboxId: string, shown: string, port: number): InterceptHooks {
    const { secrets, interception, onInjection, onNotice } = this.opts;
    return {
      secrets: () => secrets!.forSandbox(sandboxId),
      tls: interception!,
      sessions: this.sessions,
      idleMs: this.idleMs,
      connectTimeoutMs: this.connectTimeoutMs,
      onRefused: () => this.record(sandboxId, shown, port, 'secret_not_allowed'),
      onInjected: () => onInjection?.(sandboxId),
      notice: (line) => onNotice?.(sandboxId, line),
    };
  }

  private track(sandboxId: string, o: Open): () => void {
    let set = this.open.get(sandboxId);
    if (!set) this.open.set(sandboxId, (set = new Set()));
    set.add(o);
    return () => {
      set!.delete(o);
      if (set!.size === 0) this.open.delete(sandboxId);
    };
  }

  /** Absolute-form HTTP proxy request. */
  private async proxy(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // One request per client connection: every answer (relayed, or a refusal) closes it, so a request
    // pipelined behind the first is never served — and never interleaved with a raw relayed answer.
    if (this.taken.has(req.socket)) return void req.resume();
    this.taken.add(req.socket);
    const source = normalizeSource(req.socket.remoteAddress ?? '');
    const url = req.url ?? '';
    const authority = /^http:\/\/([^/?#]*)/i.exec(url)?.[1];
    if (authority === undefined) return deny(res, 400, 'sbx egress: only absolute-form http:// requests (use CONNECT for https)');
    const hp = splitAuthority(authority, 80);
    if (!hp) return deny(res, 400, 'sbx egress: bad host or port in the request URI');
    const sandboxId = await this.opts.sandboxFor(source);
    if (!sandboxId) {
      this.record(null, hp.host, hp.port, 'no_rule');
      return deny(res, 403, 'sbx egress: unknown source');
    }
    const target = parseTarget(hp.host);
    if (!target) {
      this.record(sandboxId, hp.host, hp.port, 'no_rule');
      return deny(res, 403, 'sbx egress: denied (no_rule): not a host name or IP address');
    }
    const shown = target.kind === 'name' ? target.name : hp.host;
    const j = await this.verdicts.judge(sandboxId, target, hp.port);
    if (!j.ok) {
      this.record(sandboxId, shown, hp.port, j.reason);
      return deny(res, 403, `sbx egress: denied (${j.reason}): ${shown}:${hp.port}`);
    }
    // Secrets (DESIGN §15): placeholders in headers replaced only for secrets that allow plain HTTP; others refused.
    const secrets = this.opts.secrets ? () => this.opts.secrets!.forSandbox(sandboxId) : null;
    const sent = await plainHeaders(req.rawHeaders, url, secrets, target, hp.port);
    if ('status' in sent) {
      if (sent.status === 403) this.record(sandboxId, shown, hp.port, 'secret_not_allowed');
      return deny(res, sent.status, sent.text);
    }
    if (sent.injected) this.opts.onInjection?.(sandboxId);
    // The headers as sent upstream (secrets injected where allowed), as a raw name/value list.
    const raw = Object.entries(sent.headers).flatMap(([k, v]) => (Array.isArray(v) ? v.flatMap((x) => [k, x]) : [k, v]));
    let up: { sock: Socket; address: Ip };
    const reads = new UpstreamReads();
    try {
      up = await connectFirst(j.addresses, hp.port, this.connectTimeoutMs, reads.options);
    } catch {
      this.record(sandboxId, shown, hp.port);
      return deny(res, 502, `sbx egress: ${shown}:${hp.port} did not answer`);
    }
    this.record(sandboxId, shown, hp.port);
    const path = url.slice(/^http:\/\/[^/?#]*/i.exec(url)![0].length) || '/';
    this.relayRequest(req, res, { ...up, reads }, authority, path.startsWith('/') ? path : `/${path}`, raw, sandboxId, {
      target,
      port: hp.port,
      address: up.address,
      sniChecked: true,
    });
  }

  /**
   * An allowed request on its upstream connection: the head written once, the body as is, and the
   * answer piped back on the client's socket after its rewritten head (http-relay.ts). The client's
   * connection ends with the answer (`Connection: close`): nothing else is served on it.
   */
  private relayRequest(
    req: IncomingMessage,
    res: ServerResponse,
    up: { sock: Socket; address: Ip; reads: UpstreamReads },
    authority: string,
    path: string,
    raw: readonly string[],
    sandboxId: string,
    what: Omit<Open, 'close'>,
  ): void {
    const client = req.socket;
    const open: Open = {
      ...what,
      close: () => {
        up.sock.destroy();
        client.destroy();
      },
    };
    const untrack = this.track(sandboxId, open);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      untrack();
    };
    client.once('close', () => {
      up.sock.destroy();
      finish();
    });
    up.sock.on('error', () => up.sock.destroy());
    up.sock.setTimeout(this.idleMs, () => open.close());
    up.sock.setNoDelay(true);
    up.sock.write(requestHead(req, path, authority, raw));
    sendBody(req, up.sock);
    void readResponseHead(up.sock, up.reads).then((head) => {
      if (finished || client.destroyed) return void up.sock.destroy();
      if (!head) {
        up.sock.destroy();
        deny(res, 502, 'sbx egress: upstream failed');
        return finish();
      }
      client.write(head.head);
      if (head.rest.length > 0) client.write(head.rest);
      relayAnswer(up.sock, client, finish, up.reads);
    });
  }

  /** CONNECT host:port. */
  private async tunnel(req: IncomingMessage, sock: Socket, head: Buffer): Promise<void> {
    const source = normalizeSource(sock.remoteAddress ?? '');
    const refuse = (status: 400 | 403 | 502, text: string) => refuseTunnel(sock, status, text);
    const hp = /^[^/?#@\s]+$/.test(req.url ?? '') ? splitAuthority(req.url!, null) : null;
    if (!hp) return refuse(400, 'sbx egress: CONNECT needs host:port');
    const sandboxId = await this.opts.sandboxFor(source);
    if (!sandboxId) {
      this.record(null, hp.host, hp.port, 'no_rule');
      return refuse(403, 'sbx egress: unknown source');
    }
    const target = parseTarget(hp.host);
    if (!target) {
      this.record(sandboxId, hp.host, hp.port, 'no_rule');
      return refuse(403, 'sbx egress: denied (no_rule): not a host name or IP address');
    }
    const shown = target.kind === 'name' ? target.name : hp.host;
    const j = await this.verdicts.judge(sandboxId, target, hp.port);
    if (!j.ok) {
      this.record(sandboxId, shown, hp.port, j.reason);
      return refuse(403, `sbx egress: denied (${j.reason}): ${shown}:${hp.port}`);
    }
    const needSni = j.rule.port === null;
    // A host one of the sandbox's secrets names: the tunnel is intercepted (DESIGN §15, intercept.ts).
    const secrets = this.opts.interception ? await secretsNaming(this.opts.secrets, sandboxId, target, hp.port) : null;
    if (secrets === 'unavailable') return refuse(502, 'sbx egress: the secrets of this sandbox are unavailable');
    sock.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    let first = Buffer.from(head);
    let hello: Hello | null = null;
    if (needSni || secrets) {
      // The first bytes must be a ClientHello naming the CONNECT host (bounded in size and time).
      hello = await readHello(sock, first, 10_000);
      if (!hello) return void sock.destroy();
      first = hello.bytes as Buffer<ArrayBuffer>;
      const sni = hello.sni === null ? null : hello.sni.toLowerCase().replace(/\.$/, '');
      if (needSni && (target.kind !== 'name' || sni !== target.name)) {
        this.record(sandboxId, shown, hp.port, 'sni_mismatch');
        return void sock.destroy();
      }
    }
    let up: { sock: Socket; address: Ip };
    // A plain tunnel reads its upstream through UpstreamReads (http-relay.ts); an intercepted one reads it as TLS.
    const reads = secrets && hello ? undefined : new UpstreamReads();
    try {
      up = await connectFirst(j.addresses, hp.port, this.connectTimeoutMs, reads?.options);
    } catch {
      this.record(sandboxId, shown, hp.port);
      return void sock.destroy();
    }
    this.record(sandboxId, shown, hp.port);
    if (secrets && hello) {
      const { close } = intercept({
        client: sock,
        hello,
        upstream: up.sock,
        address: up.address,
        target,
        port: hp.port,
        ...this.hooks(sandboxId, shown, hp.port),
      });
      return void sock.once('close', this.track(sandboxId, { target, port: hp.port, address: up.address, sniChecked: needSni, close }));
    }
    const open: Open = {
      target,
      port: hp.port,
      address: up.address,
      sniChecked: needSni,
      close: () => {
        sock.destroy();
        up.sock.destroy();
      },
    };
    const untrack = this.track(sandboxId, open);
    sock.setTimeout(this.idleMs, open.close);
    up.sock.setTimeout(this.idleMs, open.close);
    if (first.length > 0) up.sock.write(first);
    relay(sock, up.sock, untrack, reads);
  }
}
