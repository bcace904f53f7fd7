/**
 * Which requests are previews and where they go (DESIGN.md §9). A request whose Host (port
 * stripped, lower-cased) is `<port>-<sandbox_id>.<domain>` is a preview; on a worker, so is a
 * credentialed `/rpc/preview/<sandbox_id>/<port>/<path>` from its control plane. Everything else
 * is the API's. The router is shared by `sbx serve` (its API listener and `server.preview_addr`)
 * and `sbx worker` (its RPC listener).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { isSbxError, SbxError } from '../../../core/errors.js';
import type { PreviewUpstream } from '../../../core/ports/index.js';
import { STATUS_BY_CODE } from '../../../contracts/errors.js';
import { isUnderDomain, normalizeDomain, normalizeHost } from '../host.js';
import { forwardRequest, forwardUpgrade, sendPreviewError, writeRawError, type ForwardOptions, type PreviewStats } from './proxy.js';

export const PREVIEW_TOKEN_HEADER = 'x-sbx-preview-token';
export const PREVIEW_TOKEN_QUERY = 'sbx_token';
export const PREVIEW_TOKEN_COOKIE = 'sbx_preview_token';

/** Headers that carry API or worker credentials: never forwarded to a sandbox. */
const CREDENTIAL_HEADERS = new Set(['x-api-key', 'x-worker-token', 'x-worker-id', PREVIEW_TOKEN_HEADER]);

export interface PreviewRouterOptions {
  /** Host-routed previews under this domain ('' = none). */
  domain: string;
  /** Where a sandbox's port is reached; throws SbxError (404, 400, 502, 501) when it cannot be. */
  resolve(sandboxId: string, port: number): Promise<PreviewUpstream>;
  /**
   * `server.preview_auth` (or, on a worker, a token the control plane gave): the per-sandbox token
   * is required for host-routed previews.
   */
  token?: { required: boolean | ((sandboxId: string) => boolean); matches(sandboxId: string, given: string | undefined): boolean };
  /** True for an `Authorization` value that is an API credential of this service (dropped). */
  isApiCredential?(authorization: string): boolean;
  /** Worker side: path-routed previews from the control plane, after this check (throws SbxError). */
  path?: { prefix: string; authenticate(headers: IncomingMessage['headers']): void };
  stats: PreviewStats;
  /**
   * A host-routed request this router hands to the API instead (E2B's envd port, DESIGN.md §14):
   * called with the sandbox and port of the Host; true → the API serves it (the callee may rewrite
   * the request's URL and headers first).
   */
  divert?(req: IncomingMessage, sandboxId: string, port: number): boolean;
}

interface Match {
  sandboxId: string;
  port: number;
  /** Path and query forwarded. */
  path: string;
  /** Host-routed (token rules apply) or path-routed (worker credentials checked). */
  via: 'host' | 'path';
}

/** An answerable failure: the status, code and message of the JSON error. */
type Failure = { status: number; code: string; message: string; headers?: Record<string, string> };

const fail = (code: SbxError['code'], message: string): Failure => ({ status: STATUS_BY_CODE[code], code, message });

export class PreviewRouter {
  private readonly domain: string;

  constructor(private readonly opts: PreviewRouterOptions) {
    this.domain = normalizeDomain(opts.domain);
  }

  /** True when this request is a preview (the API never sees it). */
  handles(req: IncomingMessage): boolean {
    if (this.domain !== '') {
      const host = normalizeHost(req.headers.host);
      if (host !== null && isUnderDomain(host, this.domain)) {
        const m = this.opts.divert ? this.match(req) : null;
        if (m && !('status' in m) && m.via === 'host' && this.opts.divert!(req, m.sandboxId, m.port)) return false;
        return true;
      }
    }
    return this.opts.path !== undefined && (req.url ?? '').startsWith(this.opts.path.prefix);
  }

  /** Serves one preview request. */
  handle(req: IncomingMessage, res: ServerResponse): void {
    void this.route(req).then(
      (r) => {
        if ('status' in r) return (sendPreviewError(res, r.status, r.code, r.message), undefined);
        if ('redirect' in r) {
          res.writeHead(302, { location: r.redirect, 'set-cookie': r.cookie, 'cache-control': 'no-store', 'content-length': 0 });
          return void res.end();
        }
        forwardRequest(req, res, r.upstream, this.forwardOptions(req, r.match));
      },
      () => sendPreviewError(res, 500, 'internal', 'internal server error'),
    );
  }

  /**
   * Forwards one request to TCP `port` of a sandbox already authorized by the caller (E2B's
   * `E2b-Sandbox-Port`, DESIGN.md §14): no preview token rule, the same streaming proxy.
   */
  forward(req: IncomingMessage, res: ServerResponse, sandboxId: string, port: number, path: string): void {
    const match: Match = { sandboxId, port, path, via: 'path' };
    void this.opts.resolve(sandboxId, port).then(
      (upstream) => forwardRequest(req, res, upstream, this.forwardOptions(req, match)),
      (err: unknown) => {
        const f = failure(err);
        sendPreviewError(res, f.status, f.code, f.message);
      },
    );
  }

  /** As `forward`, for an upgrade (a WebSocket through E2B's `E2b-Sandbox-Port`, DESIGN.md §14): the sockets are spliced. */
  forwardUpgradeTo(req: IncomingMessage, socket: Socket, head: Buffer, sandboxId: string, port: number, path: string): void {
    const match: Match = { sandboxId, port, path, via: 'path' };
    void this.opts.resolve(sandboxId, port).then(
      (upstream) => forwardUpgrade(req, socket, head, upstream, this.forwardOptions(req, match)),
      (err: unknown) => {
        const f = failure(err);
        writeRawError(socket, f.status, f.code, f.message);
      },
    );
  }

  /** Serves one preview upgrade (WebSocket). */
  upgrade(req: IncomingMessage, socket: Socket, head: Buffer): void {
    void this.route(req).then(
      (r) => {
        if ('status' in r) return writeRawError(socket, r.status, r.code, r.message);
        // A token in the query of an upgrade is accepted as is: there is no page to redirect.
        const upstream = 'redirect' in r ? r.then : r.upstream;
        forwardUpgrade(req, socket, head, upstream, this.forwardOptions(req, r.match));
      },
      () => writeRawError(socket, 500, 'internal', 'internal server error'),
    );
  }

  /** Routes every preview request and upgrade of `server` here, before the API sees them. */
  attach(server: Server): void {
    const emit = server.emit.bind(server) as (event: string, ...args: unknown[]) => boolean;
    server.emit = ((event: string, ...args: unknown[]): boolean => {
      if (event === 'request' && this.handles(args[0] as IncomingMessage)) {
        this.handle(args[0] as IncomingMessage, args[1] as ServerResponse);
        return true;
      }
      if (event === 'upgrade' && this.handles(args[0] as IncomingMessage)) {
        this.upgrade(args[0] as IncomingMessage, args[1] as Socket, args[2] as Buffer);
        return true;
      }
      return emit(event, ...args);
    }) as Server['emit'];
  }

  private forwardOptions(req: IncomingMessage, m: Match): ForwardOptions {
    const isCredential = this.opts.isApiCredential;
    return {
      path: m.path,
      drop: (name, value) =>
        CREDENTIAL_HEADERS.has(name) || (name === 'authorization' && isCredential !== undefined && isCredential(value)),
      dropCookies: [PREVIEW_TOKEN_COOKIE],
      stats: this.opts.stats,
      proto: (req.socket as TLSSocket).encrypted ? 'https' : 'http',
      what: `port ${m.port} of sandbox ${m.sandboxId}`,
    };
  }

  private async route(
    req: IncomingMessage,
  ): Promise<
    Failure | { match: Match; upstream: PreviewUpstream } | { match: Match; redirect: string; cookie: string; then: PreviewUpstream }
  > {
    const m = this.match(req);
    if ('status' in m) return m;
    let redirect: { location: string; cookie: string } | null = null;
    if (m.via === 'path') {
      try {
        this.opts.path!.authenticate(req.headers);
      } catch (err) {
        return failure(err);
      }
    } else if (this.tokenRequired(m.sandboxId)) {
      const t = this.tokenOf(req, m);
      if (!this.opts.token!.matches(m.sandboxId, t.token)) {
        return fail(
          'unauthorized',
          `this preview needs the sandbox's preview token (${PREVIEW_TOKEN_HEADER} header or ?${PREVIEW_TOKEN_QUERY}=)`,
        );
      }
      if (t.from === 'query') {
        const secure = (req.socket as TLSSocket).encrypted ? '; Secure' : '';
        redirect = { location: t.rest, cookie: `${PREVIEW_TOKEN_COOKIE}=${t.token}; Path=/; HttpOnly; SameSite=Lax${secure}` };
        m.path = t.rest;
      }
    }
    let upstream: PreviewUpstream;
    try {
      upstream = await this.opts.resolve(m.sandboxId, m.port);
    } catch (err) {
      return failure(err);
    }
    if (redirect) return { match: m, redirect: redirect.location, cookie: redirect.cookie, then: upstream };
    return { match: m, upstream };
  }

  private tokenRequired(sandboxId: string): boolean {
    const required = this.opts.token?.required;
    return typeof required === 'function' ? required(sandboxId) : required === true;
  }

  private match(req: IncomingMessage): Match | Failure {
    const url = req.url ?? '/';
    const path = this.opts.path;
    if (path && url.startsWith(path.prefix)) {
      // `<prefix><sandbox_id>/<port>[/<rest>]`
      const rest = url.slice(path.prefix.length);
      const m = /^([^/?#]+)\/([^/?#]+)(.*)$/s.exec(rest);
      if (!m) return fail('bad_request', `a path preview is ${path.prefix}<sandbox_id>/<port>/<path>`);
      const port = parsePort(m[2]!);
      if (port === null) return fail('bad_request', 'port must be between 1 and 65535');
      let forwarded = m[3]!;
      if (forwarded === '' || forwarded.startsWith('?')) forwarded = `/${forwarded}`;
      return { sandboxId: decodeURIComponent(m[1]!), port, path: forwarded, via: 'path' };
    }
    const host = normalizeHost(req.headers.host) ?? '';
    const label = host.slice(0, host.length - this.domain.length - 1);
    const m = /^(\d+)-([a-z0-9][a-z0-9_-]*)$/.exec(label);
    if (!m) return fail('not_found', `no sandbox preview at ${host}: preview hosts are <port>-<sandbox_id>.${this.domain}`);
    const port = parsePort(m[1]!);
    if (port === null) return fail('bad_request', 'port must be between 1 and 65535');
    return { sandboxId: m[2]!, port, path: url.startsWith('/') ? url : `/${url}`, via: 'host' };
  }

  /** The visitor's token: header, then the one-time query parameter, then the cookie. */
  private tokenOf(
    req: IncomingMessage,
    m: Match,
  ): { token: string | undefined; from: 'header' | 'query' | 'cookie' | 'none'; rest: string } {
    const header = req.headers[PREVIEW_TOKEN_HEADER];
    if (typeof header === 'string' && header !== '') return { token: header, from: 'header', rest: m.path };
    const q = m.path.indexOf('?');
    if (q >= 0) {
      const params = new URLSearchParams(m.path.slice(q + 1));
      const given = params.get(PREVIEW_TOKEN_QUERY);
      if (given !== null) {
        params.delete(PREVIEW_TOKEN_QUERY);
        const query = params.toString();
        return { token: given, from: 'query', rest: `${m.path.slice(0, q)}${query ? `?${query}` : ''}` };
      }
    }
    for (const part of String(req.headers.cookie ?? '').split(';')) {
      const eq = part.indexOf('=');
      if (eq > 0 && part.slice(0, eq).trim() === PREVIEW_TOKEN_COOKIE)
        return { token: part.slice(eq + 1).trim(), from: 'cookie', rest: m.path };
    }
    return { token: undefined, from: 'none', rest: m.path };
  }
}

function parsePort(s: string): number | null {
  if (!/^\d{1,5}$/.test(s)) return null;
  const n = Number(s);
  return n >= 1 && n <= 65535 ? n : null;
}

function failure(err: unknown): Failure {
  if (isSbxError(err)) return { status: STATUS_BY_CODE[err.code] ?? 500, code: err.code, message: err.message };
  return { status: 502, code: 'bad_gateway', message: 'the preview could not be routed' };
}
