/**
 * The HTTP layer of the client: URLs, auth headers (the credential rules live here alone), bodies,
 * and `{code, message}` error bodies mapped back to SbxError — over a Transport (transport.ts) that
 * moves the bytes: undici by default in Node, fetch in browsers. No Node module here.
 */
import { ERROR_CODES, SbxError, type ErrorCode } from '../contracts/errors.js';
import type { Transport, TransportResponse } from './transport.js';
import { NodeTransport } from './node-transport.js';

export interface ClientOptions {
  /** Server origin (optionally with a path prefix); default `http://127.0.0.1:7423`. */
  url?: string;
  /** Sent as `X-API-Key`. */
  apiKey?: string;
  /**
   * Sent as `X-Admin-API-Key` on every API path but the worker-facing ones (which take worker
   * credentials only): admin routes need it, and on sandbox routes and the event stream it lets an
   * admin see and manage every owner's sandboxes when ownership is enforced.
   */
  adminKey?: string;
  /** Sent as `X-User-ID` (owner attribution, pool tenant). */
  userId?: string;
  /**
   * Worker credentials for the worker-facing routes (spec 4.6, 5.2) — sent there only, and there
   * nothing else is: no API key, admin key or user id.
   */
  worker?: WorkerCredentials;
  /** Extra headers on every request (e.g. `X-Request-ID`). */
  headers?: Record<string, string>;
  /**
   * How requests travel: default the undici transport (Node); a `FetchTransport` works in browsers
   * and Node alike (the browser entry `client/browser.js` uses it by default).
   */
  transport?: Transport;
}

/** A worker's identity: `X-Worker-ID` plus the token as `X-Worker-Token` or `Authorization: Bearer`. */
export interface WorkerCredentials {
  id: string;
  token: string;
  /** Send the token as `Authorization: Bearer` instead of `X-Worker-Token` (signed tokens usually are). */
  bearer?: boolean;
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface CallOptions {
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
  /** Sent as is with `Content-Type: application/octet-stream` (raw file writes); instead of `body`. */
  bytes?: Uint8Array;
  signal?: AbortSignal;
  /** Statuses returned as success instead of thrown (readiness answers 503 with a body). */
  accept?: number[];
  /** Headers of this request alone (e.g. `Idempotency-Key`). */
  headers?: Record<string, string>;
}

export type RawResponse = TransportResponse;

export const DEFAULT_URL = 'http://127.0.0.1:7423';

/** User and admin credentials and attribution: never sent to worker routes. */
const CREDENTIAL_HEADERS = ['x-api-key', 'x-admin-api-key', 'x-user-id', 'authorization', 'x-worker-id', 'x-worker-token'];
/** Worker credentials: never sent anywhere but worker routes. */
const WORKER_HEADERS = ['x-worker-id', 'x-worker-token'];

const CODE_BY_STATUS: Record<number, ErrorCode> = {
  400: 'bad_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  408: 'timeout',
  409: 'conflict',
  413: 'payload_too_large',
  429: 'resource_limit',
  500: 'provider_error',
  503: 'unavailable',
};

/** Normalizes a base URL (no trailing slash); throws TypeError when it is not http(s). */
export function normalizeBaseUrl(url: string): string {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TypeError(`unsupported URL scheme ${parsed.protocol} (use http:// or https://)`);
  }
  return parsed.toString().replace(/\/+$/, '');
}

/** One short reason for a network failure (`connection refused (ECONNREFUSED)`). */
export function describeNetworkError(err: unknown): string {
  const e = err as { code?: string; message?: string; cause?: unknown };
  const inner = (e.cause as { code?: string; message?: string } | undefined) ?? e;
  const code = inner.code ?? e.code;
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host lookup failed',
    ETIMEDOUT: 'connection timed out',
    EHOSTUNREACH: 'host unreachable',
    UND_ERR_CONNECT_TIMEOUT: 'connection timed out',
    UND_ERR_SOCKET: 'connection closed',
  };
  if (code && words[code]) return `${words[code]} (${code})`;
  return inner.message ?? e.message ?? String(err);
}

/** What a 502, 504, or 503 without an sbx error body means: a proxy in front could not get an answer. */
const GATEWAY_REASON: Record<number, string> = {
  502: 'unreachable (HTTP 502 Bad Gateway from a proxy in front of it)',
  503: 'unavailable (HTTP 503 Service Unavailable)',
  504: 'unreachable (HTTP 504 Gateway Timeout from a proxy in front of it)',
};

/**
 * Maps an HTTP error answer to SbxError; `details` keeps extra body members plus status and path.
 * `baseUrl` names the server in the message when the answer came from a proxy rather than sbx.
 */
export function errorFromBody(status: number, text: string, method: string, path: string, baseUrl?: string): SbxError {
  let body: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) body = parsed as Record<string, unknown>;
  } catch {
    body = undefined;
  }
  const given = typeof body?.code === 'string' ? body.code : undefined;
  const fromSbx = given !== undefined && (ERROR_CODES as readonly string[]).includes(given) && typeof body?.message === 'string';
  if (GATEWAY_REASON[status] && !fromSbx) {
    const where = baseUrl ? `sbx server at ${baseUrl}` : 'sbx server';
    return new SbxError('unavailable', `${where} is ${GATEWAY_REASON[status]} for ${method} ${path}`, {
      status,
      method,
      path,
      ...(baseUrl ? { url: baseUrl } : {}),
    });
  }
  const code: ErrorCode =
    given && (ERROR_CODES as readonly string[]).includes(given)
      ? (given as ErrorCode)
      : (CODE_BY_STATUS[status] ?? (status >= 500 ? 'internal' : 'bad_request'));
  const message = typeof body?.message === 'string' && body.message !== '' ? body.message : `HTTP ${status} from ${method} ${path}`;
  const { code: _c, message: _m, ...rest } = body ?? {};
  return new SbxError(code, message, { ...rest, status, method, path, ...(given && given !== code ? { server_code: given } : {}) });
}

export class Http {
  readonly baseUrl: string;
  readonly transport: Transport;
  private readonly opts: ClientOptions;

  constructor(opts: ClientOptions = {}) {
    this.opts = opts;
    this.baseUrl = normalizeBaseUrl(opts.url ?? DEFAULT_URL);
    this.transport = opts.transport ?? new NodeTransport();
  }

  /**
   * Auth and attribution headers for a path. Worker routes take worker credentials only (spec
   * 5.2), and worker credentials go nowhere else: one request never carries both kinds.
   */
  headersFor(path: string): Record<string, string> {
    const h: Record<string, string> = this.transport.userAgent ? { 'user-agent': this.transport.userAgent } : {};
    for (const [k, v] of Object.entries(this.opts.headers ?? {})) h[k.toLowerCase()] = v;
    if (path.startsWith('/api/v1/worker/')) {
      for (const k of CREDENTIAL_HEADERS) delete h[k];
      const w = this.opts.worker;
      if (w) {
        h['x-worker-id'] = w.id;
        if (w.bearer) h.authorization = `Bearer ${w.token}`;
        else h['x-worker-token'] = w.token;
      }
      return h;
    }
    for (const k of WORKER_HEADERS) delete h[k];
    if (this.opts.apiKey) h['x-api-key'] = this.opts.apiKey;
    if (this.opts.adminKey) h['x-admin-api-key'] = this.opts.adminKey;
    if (this.opts.userId) h['x-user-id'] = this.opts.userId;
    return h;
  }

  /** The worker credentials, or a clear error before anything is sent. */
  workerCredentials(): WorkerCredentials {
    const w = this.opts.worker;
    if (!w?.id || !w.token)
      throw new SbxError('unauthorized', 'worker routes need worker credentials: pass `worker: { id, token }` to the Client');
    return w;
  }

  get hasAdminKey(): boolean {
    return Boolean(this.opts.adminKey);
  }

  get hasApiKey(): boolean {
    return Boolean(this.opts.apiKey);
  }

  url(path: string, query?: Query): string {
    let out = this.baseUrl + path;
    if (query) {
      const qs = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
      const s = qs.toString();
      if (s) out += `?${s}`;
    }
    return out;
  }

  unreachable(err: unknown): SbxError {
    return new SbxError('unavailable', `cannot reach sbx server at ${this.baseUrl}: ${describeNetworkError(err)}`, {
      network: true,
      url: this.baseUrl,
    });
  }

  /** Sends a request; returns the raw response whatever its status (network failure → `unavailable`). */
  async send(method: string, path: string, opts: CallOptions = {}): Promise<RawResponse> {
    const headers = this.headersFor(path);
    for (const [k, v] of Object.entries(opts.headers ?? {})) headers[k.toLowerCase()] = v;
    let body: string | Uint8Array | undefined;
    if (opts.bytes !== undefined) {
      body = opts.bytes;
      headers['content-type'] = 'application/octet-stream';
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    try {
      return await this.transport.request({ method, url: this.url(path, opts.query), headers, body, signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      throw this.unreachable(err);
    }
  }

  /** Throws the mapped SbxError when the status is an error (and not accepted). */
  async check(res: RawResponse, method: string, path: string, accept: number[] = []): Promise<void> {
    if (res.status < 400 || accept.includes(res.status)) return;
    const text = await res.body.text().catch(() => '');
    throw errorFromBody(res.status, text, method, path, this.baseUrl);
  }

  /** JSON request → parsed JSON answer. */
  async json<T>(method: string, path: string, opts: CallOptions = {}): Promise<T> {
    return (await this.jsonWithHeaders<T>(method, path, opts)).body;
  }

  /** JSON request → parsed JSON answer and the response headers (sbx extensions such as X-Log-Cursor). */
  async jsonWithHeaders<T>(method: string, path: string, opts: CallOptions = {}): Promise<{ body: T; headers: RawResponse['headers'] }> {
    const res = await this.send(method, path, opts);
    await this.check(res, method, path, opts.accept);
    const text = await this.readText(res);
    if (text === '') return { body: undefined as T, headers: res.headers };
    try {
      return { body: JSON.parse(text) as T, headers: res.headers };
    } catch {
      throw new SbxError('internal', `invalid JSON from ${method} ${path}`, { status: res.status });
    }
  }

  /** Request → raw bytes answer (file reads). */
  async bytes(method: string, path: string, opts: CallOptions = {}): Promise<Uint8Array> {
    const res = await this.send(method, path, opts);
    await this.check(res, method, path, opts.accept);
    try {
      return new Uint8Array(await res.body.arrayBuffer());
    } catch (err) {
      if (opts.signal?.aborted) throw err;
      throw this.unreachable(err);
    }
  }

  /** Request → text answer (Prometheus, CSV). */
  async text(method: string, path: string, opts: CallOptions = {}): Promise<string> {
    const res = await this.send(method, path, opts);
    await this.check(res, method, path, opts.accept);
    return this.readText(res);
  }

  private async readText(res: RawResponse): Promise<string> {
    try {
      return await res.body.text();
    } catch (err) {
      throw this.unreachable(err);
    }
  }

  /** Closes idle keep-alive sockets so the process can exit. */
  async close(): Promise<void> {
    await this.transport.close?.();
  }
}

/** The `Idempotency-Key` header of a spawn, when given. */
export function spawnHeaders(opts: { idempotencyKey?: string }): Record<string, string> | undefined {
  return opts.idempotencyKey !== undefined ? { 'idempotency-key': opts.idempotencyKey } : undefined;
}
