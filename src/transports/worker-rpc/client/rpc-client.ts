/**
 * Envelope calls to a worker's `POST /rpc` (DESIGN.md §7) over one keep-alive undici Agent, with
 * mTLS when `worker.rpc_tls` says so. An answer that is not the envelope of this call is
 * `provider_error` (its body is never repeated); a worker that cannot be reached is `unavailable`;
 * a typed error envelope keeps its code and the worker's own message.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Readable } from 'node:stream';
import { Agent, request } from 'undici';
import { RPC_PATH, RPC_STREAM_HEADER, type RpcLease } from '../../../contracts/worker-rpc.js';
import type { WorkerCredentials } from '../../../core/auth/settings.js';
import { ERROR_CODES, isAbortError, SbxError, type ErrorCode } from '../../../core/errors.js';
import type { WorkerRecord } from '../../../core/ports/index.js';
import { currentRequestId } from '../../shared/request-context.js';
import { hasRpcCredential, replicaToken, rpcToken } from './credentials.js';

export interface RpcTls {
  enabled: boolean;
  ca_file?: string;
  client_cert_file?: string;
  client_key_file?: string;
  server_name?: string;
  insecure_skip_verify?: boolean;
}

export interface RpcClientOptions {
  credentials: WorkerCredentials;
  tls?: RpcTls;
  now?: () => Date;
  log?: (fields: Record<string, unknown>, message: string) => void;
  /** Deadline of a control call (default 30 s). */
  callTimeoutMs?: number;
  /**
   * Replicas on one database (DESIGN §7): a worker row that is another replica's local worker is
   * called with a `replica:rpc` token signed by the installation key, never a worker credential.
   */
  replicas?: { isReplica(w: WorkerRecord): boolean; installationKey: string };
}

/** TLS material for the Agent and the WebSocket client, read once. */
export interface TlsMaterial {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  servername?: string;
  rejectUnauthorized: boolean;
}

function readTls(tls: RpcTls | undefined): TlsMaterial | undefined {
  if (!tls?.enabled) return undefined;
  const read = (what: string, path: string | undefined) => {
    if (!path) return undefined;
    try {
      return readFileSync(path);
    } catch (err) {
      throw new Error(`worker.rpc_tls.${what}: cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  };
  const m: TlsMaterial = { rejectUnauthorized: tls.insecure_skip_verify !== true };
  const ca = read('ca_file', tls.ca_file);
  const cert = read('client_cert_file', tls.client_cert_file);
  const key = read('client_key_file', tls.client_key_file);
  if (ca) m.ca = ca;
  if (cert) m.cert = cert;
  if (key) m.key = key;
  if (tls.server_name) m.servername = tls.server_name;
  return m;
}

const KNOWN = new Set<string>(ERROR_CODES);
/**
 * Longest silence of a streamed exec before the link counts as lost: the worker sends a blank line
 * every 5 s while its command is quiet, so three missed ones mean the worker or the link is gone.
 */
export const STREAM_IDLE_MS = 15_000;

export class RpcClient {
  readonly tls: TlsMaterial | undefined;
  private readonly agent: Agent;
  private readonly now: () => Date;
  private readonly callTimeoutMs: number;

  constructor(private readonly opts: RpcClientOptions) {
    this.tls = readTls(opts.tls);
    this.now = opts.now ?? (() => new Date());
    this.callTimeoutMs = opts.callTimeoutMs ?? 30_000;
    this.agent = new Agent({
      keepAliveTimeout: 10_000,
      connectTimeout: 10_000,
      headersTimeout: 0,
      bodyTimeout: 0,
      connect: this.tls ? { ...this.tls } : {},
    });
  }

  /** Why this worker cannot be called from here, or null. */
  unreachableReason(w: WorkerRecord): string | null {
    if (!w.capacity.rpc_url) return `worker ${w.id} advertises no rpc_url`;
    if (!/^https?:\/\/[^/?#\s]+/.test(w.capacity.rpc_url)) return `worker ${w.id} advertises an rpc_url that is not an http(s) URL`;
    if (this.isReplica(w)) return null;
    if (!hasRpcCredential(this.opts.credentials, w.id))
      return `no credential for worker ${w.id} (set auth.worker_token or auth.worker_signing_key)`;
    return null;
  }

  /** True when `w` is another replica's local worker (it takes replica tokens only). */
  private isReplica(w: WorkerRecord): boolean {
    return this.opts.replicas?.isReplica(w) ?? false;
  }

  /** `{rpc_url}/rpc` (as is when it already ends in /rpc). */
  rpcUrl(w: WorkerRecord): string {
    const base = (w.capacity.rpc_url ?? '').replace(/\/+$/, '');
    return base.endsWith(RPC_PATH) ? base : `${base}${RPC_PATH}`;
  }

  /** Worker headers of spec 5.2 for one call. */
  headers(w: WorkerRecord): Record<string, string> {
    const why = this.unreachableReason(w);
    if (why !== null) throw new SbxError('remote_worker_rpc_unavailable', why);
    const r = this.opts.replicas;
    const token =
      r && this.isReplica(w) ? replicaToken(r.installationKey, w.id, this.now()) : rpcToken(this.opts.credentials, w.id, this.now())!;
    return { 'x-worker-id': w.id, 'x-worker-token': token, 'x-request-id': currentRequestId() ?? randomUUID() };
  }

  /** One call: the `result` of the answer envelope, or the typed error. */
  async call<T>(
    w: WorkerRecord,
    method: string,
    params: Record<string, unknown>,
    opts: { lease?: RpcLease | null; signal?: AbortSignal; timeoutMs?: number } = {},
  ): Promise<T> {
    const res = await this.post(w, method, params, opts, false);
    return (await this.envelope(w, res.id, res.body, res.status)) as T;
  }

  /**
   * `worker.exec_stream` (or another streamed method: `worker.file_watch`) with `X-Worker-Stream:
   * ndjson`: the body as it arrives (one envelope per line) and the call id. The caller parses and
   * ends it; aborting `signal` closes the request.
   */
  async stream(
    w: WorkerRecord,
    params: Record<string, unknown>,
    signal: AbortSignal,
    lease: RpcLease | null = null,
    method: 'worker.exec_stream' | 'worker.file_watch' = 'worker.exec_stream',
  ): Promise<{ id: string; body: Readable }> {
    const res = await this.post(w, method, params, { signal, lease }, true);
    if (res.status !== 200) {
      await this.envelope(w, res.id, res.body, res.status);
      throw this.invalid(w);
    }
    return { id: res.id, body: res.body };
  }

  private async post(
    w: WorkerRecord,
    method: string,
    params: Record<string, unknown>,
    opts: { lease?: RpcLease | null; signal?: AbortSignal; timeoutMs?: number },
    ndjson: boolean,
  ): Promise<{ id: string; status: number; body: Readable }> {
    const id = randomBytes(8).toString('hex');
    const envelope: Record<string, unknown> = { id, method, worker_id: w.id, params };
    if (opts.lease) envelope.lease = opts.lease;
    const headers: Record<string, string> = { ...this.headers(w), 'content-type': 'application/json' };
    if (ndjson) headers[RPC_STREAM_HEADER] = 'ndjson';
    const deadline = ndjson ? undefined : AbortSignal.timeout(opts.timeoutMs ?? this.callTimeoutMs);
    const signal = opts.signal && deadline ? AbortSignal.any([opts.signal, deadline]) : (opts.signal ?? deadline);
    try {
      // A stream goes quiet for at most KEEPALIVE on a live link (the worker sends blank lines).
      const bodyTimeout = ndjson ? STREAM_IDLE_MS : 0;
      const headersTimeout = ndjson ? STREAM_IDLE_MS : 0;
      const res = await request(this.rpcUrl(w), {
        method: 'POST',
        dispatcher: this.agent,
        headers,
        body: JSON.stringify(envelope),
        signal,
        bodyTimeout,
        headersTimeout,
      });
      return { id, status: res.statusCode, body: res.body };
    } catch (err) {
      throw this.unreachable(w, method, err, opts.signal);
    }
  }

  /** Reads an answer body (bounded) and returns its result or throws its error. */
  private async envelope(w: WorkerRecord, id: string, body: Readable, status: number): Promise<unknown> {
    let text = '';
    try {
      for await (const chunk of body) {
        text += (chunk as Buffer).toString('utf8');
        if (text.length > 64 * 1024 * 1024) throw this.invalid(w);
      }
    } catch (err) {
      if (err instanceof SbxError) throw err;
      throw new SbxError('unavailable', `lost the connection to worker ${w.id}`);
    }
    let env: { id?: unknown; worker_id?: unknown; result?: unknown; error?: { code?: unknown; message?: unknown } };
    try {
      env = JSON.parse(text) as typeof env;
    } catch {
      throw this.invalid(w);
    }
    if (!env || typeof env !== 'object' || (env.id !== id && env.id !== '')) throw this.invalid(w);
    if (env.error && typeof env.error === 'object') throw errorFrom(w, env.error);
    if (status !== 200 || !('result' in env)) throw this.invalid(w);
    return env.result;
  }

  invalid(w: WorkerRecord): SbxError {
    return new SbxError('provider_error', `worker ${w.id} answered an invalid RPC response`);
  }

  /** A transport failure: a cancel stays an abort; anything else is the worker being unreachable. */
  unreachable(w: WorkerRecord, method: string, err: unknown, signal?: AbortSignal): unknown {
    if (signal?.aborted && isAbortError(err)) return err;
    if (err instanceof SbxError) return err;
    const code = (err as { code?: string }).code ?? (err as Error).name;
    this.opts.log?.({ worker_id: w.id, method, cause: code }, 'worker RPC failed');
    return new SbxError('unavailable', `worker ${w.id} is unreachable`);
  }

  async close(): Promise<void> {
    await this.agent.close().catch(() => undefined);
  }
}

/** A worker's error envelope as a typed error; unknown codes are provider failures. */
export function errorFrom(w: WorkerRecord, e: { code?: unknown; message?: unknown }): SbxError {
  const code = typeof e.code === 'string' && KNOWN.has(e.code) ? (e.code as ErrorCode) : 'provider_error';
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : `worker ${w.id} failed`;
  return new SbxError(code, message.slice(0, 1000));
}
