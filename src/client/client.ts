/**
 * The typed sbx client — the package's library API and what every CLI command uses.
 *
 *   const sbx = new Client({ url: 'http://127.0.0.1:7423', apiKey });
 *   const box = await sbx.spawn({ ttl: '10m' });
 *   for await (const chunk of sbx.execStream(box.id, { command: 'ls', mode: 'argv' })) …
 */
import { SbxError } from '../contracts/errors.js';
import { bytesToBase64 } from './base64.js';
import { eventStream, type EventStreamOptions } from './events.js';
import { type ExecSession, type ExecWsInput, type ExecWsOptions, openExecSession } from './exec-ws.js';
import { FilesApi } from './files.js';
import { Http, spawnHeaders, type ClientOptions } from './http.js';
import { parseNdjson } from './ndjson.js';
import { type ExecBytesChunk, ndjsonToBytes, parseExecFrames } from './exec-frames.js';
import { EXEC_BINARY_MEDIA_TYPE } from '../contracts/exec-frames.js';
import { ProcessesApi } from './processes.js';
import { ProvidersApi, QuotasApi, TemplatesApi, WorkerFacingApi, WorkersApi } from './resources.js';
import { VolumesApi } from './volumes.js';
import { SecretsApi } from './secrets.js';
import { PauseForkApi } from './pause-fork.js';
import type {
  AdmissionDecision,
  AuditQuery,
  AuditRecord,
  Diagnostics,
  ExecChunk,
  ExecInput,
  ExecRequest,
  ExecResult,
  ForkRequest,
  Health,
  LogPage,
  Metrics,
  PoolStatus,
  Readiness,
  RequestOptions,
  Sandbox,
  SpawnOptions,
  SbxEvent,
  WatchEvent,
  SnapshotSummary,
  SpawnRequest,
} from './types.js';

const enc = encodeURIComponent;

function execBody(input: ExecInput, stream: boolean): ExecRequest {
  const { stdin, ...rest } = input;
  const body: ExecRequest = { ...rest, stream };
  if (stdin !== undefined) {
    if (typeof stdin === 'string') {
      body.stdin = stdin;
      body.stdin_encoding = 'utf8';
    } else {
      body.stdin = bytesToBase64(stdin);
      body.stdin_encoding = 'base64';
    }
  }
  return body;
}

export class Client {
  /** The normalized server URL. */
  readonly url: string;
  readonly files: FilesApi;
  readonly templates: TemplatesApi;
  readonly quotas: QuotasApi;
  readonly providers: ProvidersApi;
  readonly workers: WorkersApi;
  /** Named volumes sandboxes mount (DESIGN.md §10). */
  readonly volumes: VolumesApi;
  /** Secrets the sandbox never sees (DESIGN.md §15). */
  readonly secrets: SecretsApi;
  /** Worker → control plane routes, with the `worker` credentials of the options. */
  readonly worker: WorkerFacingApi;
  /** Background processes of a sandbox. */
  readonly processes: ProcessesApi;
  /** Pause, resume and fork (DESIGN.md §16). */
  readonly lifecycle: PauseForkApi;
  private readonly http: Http;

  constructor(opts: ClientOptions = {}) {
    this.http = new Http(opts);
    this.url = this.http.baseUrl;
    this.files = new FilesApi(this.http);
    this.templates = new TemplatesApi(this.http);
    this.quotas = new QuotasApi(this.http);
    this.providers = new ProvidersApi(this.http);
    this.workers = new WorkersApi(this.http);
    this.volumes = new VolumesApi(this.http);
    this.secrets = new SecretsApi(this.http);
    this.worker = new WorkerFacingApi(this.http);
    this.processes = new ProcessesApi(this.http);
    this.lifecycle = new PauseForkApi(this.http);
  }

  /**
   * Watches a sandbox directory (DESIGN §16): an async iterable of its changes as they happen;
   * ends when `signal` aborts, the sandbox goes, or after `{type: "overflow"}`. `recursive`
   * defaults to true. Refusals throw when iteration starts.
   */
  watchFiles(
    id: string,
    path: string,
    opts: { recursive?: boolean; onStart?: () => void } & RequestOptions = {},
  ): AsyncGenerator<WatchEvent> {
    return this.files.watch(id, path, opts);
  }

  // Sandboxes (spec 4.1)

  /** Spawns a sandbox; an empty request uses server defaults. */
  spawn(req: SpawnRequest = {}, opts: SpawnOptions = {}): Promise<Sandbox> {
    return this.http.json('POST', '/api/v1/sandboxes', { body: req, signal: opts.signal, headers: spawnHeaders(opts) });
  }

  /** Forks a running sandbox (DESIGN.md §16): see `lifecycle.fork`. */
  fork(id: string, req: ForkRequest = {}, opts: SpawnOptions = {}): Promise<Sandbox[]> {
    return this.lifecycle.fork(id, req, opts);
  }

  /** Admission preflight: would this spawn be admitted? Creates nothing. */
  admission(req: SpawnRequest = {}, opts: RequestOptions = {}): Promise<AdmissionDecision> {
    return this.http.json('POST', '/api/v1/sandboxes/admission', { body: req, signal: opts.signal });
  }

  /**
   * Live sandboxes, oldest first. sbx extensions: `id_prefix` keeps ids starting with it, `limit`
   * (1–1000) caps the answer; without them the whole list.
   */
  list(opts: RequestOptions & { id_prefix?: string; limit?: number } = {}): Promise<Sandbox[]> {
    const { id_prefix, limit, signal } = opts;
    return this.http.json('GET', '/api/v1/sandboxes', { query: { id_prefix, limit }, signal });
  }

  /**
   * One page of live sandboxes (DESIGN.md §13): at most `limit` (1–1000), after the cursor of the
   * previous page; `next` is the cursor of the following page, null at the end.
   */
  async listPage(
    opts: RequestOptions & { limit: number; after?: string; id_prefix?: string },
  ): Promise<{ items: Sandbox[]; next: string | null }> {
    const { id_prefix, limit, after, signal } = opts;
    const { body, headers } = await this.http.jsonWithHeaders<Sandbox[]>('GET', '/api/v1/sandboxes', {
      query: { id_prefix, limit, after },
      signal,
    });
    return { items: body, next: nextCursor(headers.link) };
  }

  /** Every live sandbox, page by page (`pageSize` per request, default 500): memory per page, not per fleet. */
  async *listAll(opts: RequestOptions & { id_prefix?: string; pageSize?: number } = {}): AsyncGenerator<Sandbox> {
    let after: string | undefined;
    for (;;) {
      const page = await this.listPage({ limit: opts.pageSize ?? 500, after, id_prefix: opts.id_prefix, signal: opts.signal });
      yield* page.items;
      if (page.next === null) return;
      after = page.next;
    }
  }

  get(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json('GET', `/api/v1/sandboxes/${enc(id)}`, opts);
  }

  /** Destroys a sandbox (idempotent for destroyed/expired ones). */
  destroy(id: string, opts: RequestOptions = {}): Promise<{ status: 'destroyed' }> {
    return this.http.json('DELETE', `/api/v1/sandboxes/${enc(id)}`, opts);
  }

  /** Removes expired sandboxes; returns how many. */
  prune(opts: RequestOptions = {}): Promise<{ pruned: number }> {
    return this.http.json('DELETE', '/api/v1/sandboxes', opts);
  }

  /** Sets `expires_at` to now + ttl. */
  /** `PUT …/egress` (DESIGN.md §10): replaces both egress lists of a filtered sandbox. */
  updateEgress(id: string, lists: { allow?: string[]; deny?: string[] }, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json('PUT', `/api/v1/sandboxes/${enc(id)}/egress`, {
      body: { allow: lists.allow ?? [], deny: lists.deny ?? [] },
      signal: opts.signal,
    });
  }

  /** `POST …/pause` (DESIGN.md §16): see `lifecycle.pause`. */
  pause(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.lifecycle.pause(id, opts);
  }

  /** `POST …/resume` (DESIGN.md §16): see `lifecycle.resume`. */
  resume(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.lifecycle.resume(id, opts);
  }

  extend(id: string, ttl: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json('POST', `/api/v1/sandboxes/${enc(id)}/extend`, { body: { ttl }, signal: opts.signal });
  }

  /** Console log lines (default 100). */
  logs(id: string, lines?: number, opts: RequestOptions = {}): Promise<string[]> {
    return this.http.json('GET', `/api/v1/sandboxes/${enc(id)}/logs`, { query: { lines }, signal: opts.signal });
  }

  /**
   * Console lines with a cursor (an sbx extension): without `after` the last `lines` (default
   * 100), with it only the lines recorded after that cursor, oldest first, at most `lines`. Pass
   * the returned `cursor` as the next `after` to read every line exactly once, repeated ones
   * included. A server without the extension answers without a cursor (and ignores `after`).
   */
  async readLogs(id: string, query: { lines?: number; after?: number } = {}, opts: RequestOptions = {}): Promise<LogPage> {
    const { body, headers } = await this.http.jsonWithHeaders<string[]>('GET', `/api/v1/sandboxes/${enc(id)}/logs`, {
      query: { lines: query.lines, after: query.after },
      signal: opts.signal,
    });
    // The header is LOG_CURSOR_HEADER of contracts/sandboxes.ts; the client loads no schema code.
    const raw = headers['x-log-cursor'];
    const cursor = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : undefined;
    return { lines: body, cursor };
  }

  // Exec

  /**
   * Buffered exec. A deadline answers 408 → SbxError `timeout` with details {stdout, stderr, duration}.
   * With `binary: true`, a stdout or stderr that is not valid UTF-8 comes base64, marked by
   * `stdout_encoding` / `stderr_encoding` (also in the timeout details).
   */
  exec(id: string, input: ExecInput, opts: RequestOptions = {}): Promise<ExecResult> {
    return this.http.json('POST', `/api/v1/sandboxes/${enc(id)}/exec`, { body: execBody(input, false), signal: opts.signal });
  }

  /**
   * Streamed exec: chunks `{stream: 'stdout'|'stderr', data}` as they come, then (unless
   * `exit_record: false`) one `{stream: 'exit', exit_code, duration}`. With `binary: true`, a chunk
   * whose bytes are not valid UTF-8 comes as `{stream, data: <base64>, encoding: 'base64'}`
   * (`Buffer.from(data, 'base64')` gives the exact bytes). Errors before the stream
   * starts throw the mapped SbxError (before `onStart` is called); a broken stream throws
   * `unavailable`.
   */
  async *execStream(id: string, input: ExecInput, opts: RequestOptions & { onStart?: () => void } = {}): AsyncGenerator<ExecChunk> {
    const path = `/api/v1/sandboxes/${enc(id)}/exec`;
    const body = execBody({ exit_record: true, ...input }, true);
    const res = await this.http.send('POST', path, { body, signal: opts.signal });
    await this.http.check(res, 'POST', path);
    // From here on the command runs; callers tell "rejected" from "failed while running" by this.
    opts.onStart?.();
    try {
      yield* parseNdjson<ExecChunk>(res.body);
    } catch (err) {
      if (opts.signal?.aborted || err instanceof SbxError) throw err;
      throw new SbxError('unavailable', `exec stream from ${this.url} broke off: ${(err as Error).message}`, {
        network: true,
        url: this.url,
      });
    } finally {
      res.body.cancel();
    }
  }

  /**
   * Streamed exec, byte-exact: raw output chunks as they come, then one exit (`error` set, exit
   * 125, when sbx itself failed while the command ran). Asks for the binary frames of DESIGN.md §11
   * (`Accept: application/octet-stream`); a server that answers NDJSON is read the same way.
   * Errors before the stream starts throw the mapped SbxError (before `onStart`); a broken
   * stream throws `unavailable`. The CLI's `sbx exec` uses it.
   */
  async *execBytes(id: string, input: ExecInput, opts: RequestOptions & { onStart?: () => void } = {}): AsyncGenerator<ExecBytesChunk> {
    const path = `/api/v1/sandboxes/${enc(id)}/exec`;
    const body = execBody({ exit_record: true, binary: true, ...input }, true);
    const res = await this.http.send('POST', path, { body, signal: opts.signal, headers: { accept: EXEC_BINARY_MEDIA_TYPE } });
    await this.http.check(res, 'POST', path);
    opts.onStart?.();
    const type = String(res.headers['content-type'] ?? '');
    try {
      if (type.startsWith(EXEC_BINARY_MEDIA_TYPE)) yield* parseExecFrames(res.body);
      else for await (const chunk of parseNdjson<ExecChunk>(res.body)) yield ndjsonToBytes(chunk);
    } catch (err) {
      if (opts.signal?.aborted || err instanceof SbxError) throw err;
      throw new SbxError('unavailable', `exec stream from ${this.url} broke off: ${(err as Error).message}`, {
        network: true,
        url: this.url,
      });
    } finally {
      res.body.cancel();
    }
  }

  /**
   * WebSocket exec: a live session with stdin, an optional terminal, resize and signals.
   *
   *   const s = await sbx.execWs(id, { command: 'cat', mode: 'argv' });
   *   await s.write('hello\n'); s.end();
   *   for await (const m of s) if (m.type === 'stdout') process.stdout.write(m.data);
   *
   * With `binary: true`, output that is not valid UTF-8 comes base64 with `encoding: 'base64'`.
   * Refusals of the upgrade (auth, rate limit, a server without the route) throw the mapped
   * SbxError; errors after it (unknown sandbox, limits, provider failures) arrive as a last
   * `{type: 'error', code, message}` message.
   */
  execWs(id: string, input: ExecWsInput, opts: ExecWsOptions = {}): Promise<ExecSession> {
    return openExecSession(this.http, `/api/v1/sandboxes/${enc(id)}/exec/ws`, input, opts);
  }

  // Events (DESIGN.md §3)

  /** Server-sent events as an async iterator; reconnects with `Last-Event-ID` on drops. */
  events(opts: EventStreamOptions = {}): AsyncGenerator<SbxEvent> {
    return eventStream(this.http, opts);
  }

  // System (spec 4.7, 4.8, 4.9)

  health(opts: RequestOptions = {}): Promise<Health> {
    return this.http.json('GET', '/api/v1/health', opts);
  }

  live(opts: RequestOptions = {}): Promise<Health> {
    return this.http.json('GET', '/api/v1/live', opts);
  }

  /** Readiness; answers with the body for 503 (not ready) too. */
  ready(opts: RequestOptions = {}): Promise<Readiness> {
    return this.http.json('GET', '/api/v1/ready', { ...opts, accept: [503] });
  }

  /** Snapshot summaries visible to the caller, sorted by name. */
  snapshots(opts: RequestOptions = {}): Promise<SnapshotSummary[]> {
    return this.http.json('GET', '/api/v1/snapshots', opts);
  }

  /** Saves a running sandbox's filesystem as snapshot `name` (DESIGN.md §10); spawn from it with `{snapshot: name}`. */
  snapshot(id: string, name: string, opts: RequestOptions = {}): Promise<SnapshotSummary> {
    return this.http.json('POST', `/api/v1/sandboxes/${enc(id)}/snapshot`, { body: { name }, signal: opts.signal });
  }

  getSnapshot(name: string, opts: RequestOptions = {}): Promise<SnapshotSummary> {
    return this.http.json('GET', `/api/v1/snapshots/${enc(name)}`, opts);
  }

  deleteSnapshot(name: string, opts: RequestOptions = {}): Promise<{ status: 'deleted' }> {
    return this.http.json('DELETE', `/api/v1/snapshots/${enc(name)}`, opts);
  }

  poolStatus(opts: RequestOptions = {}): Promise<PoolStatus> {
    return this.http.json('GET', '/api/v1/pool/status', opts);
  }

  /** Diagnostics (the admin alias when an admin key is configured). */
  diagnostics(opts: RequestOptions = {}): Promise<Diagnostics> {
    return this.http.json('GET', this.adminOr('/diagnostics'), opts);
  }

  /** JSON metrics (the admin alias when an admin key is configured). */
  metrics(opts: RequestOptions = {}): Promise<Metrics> {
    return this.http.json('GET', this.adminOr('/metrics'), opts);
  }

  /** Prometheus text metrics. */
  prometheus(opts: RequestOptions = {}): Promise<string> {
    return this.http.text('GET', this.adminOr('/metrics/prometheus'), opts);
  }

  /** The OpenAPI document. */
  openapi(opts: RequestOptions = {}): Promise<Record<string, unknown>> {
    return this.http.json('GET', '/api/v1/openapi.json', opts);
  }

  /** Admin audit history, newest first. */
  audit(query: AuditQuery = {}, opts: RequestOptions = {}): Promise<AuditRecord[]> {
    return this.http.json('GET', '/api/v1/admin/audit', { query: { ...query }, signal: opts.signal });
  }

  /** Admin audit history as CSV. */
  auditCsv(query: AuditQuery = {}, opts: RequestOptions = {}): Promise<string> {
    return this.http.text('GET', '/api/v1/admin/audit', { query: { ...query, format: 'csv' }, signal: opts.signal });
  }

  /** Releases pooled connections; call when done so the process can exit. */
  close(): Promise<void> {
    return this.http.close();
  }

  private adminOr(suffix: string): string {
    return `/api/v1${this.http.hasAdminKey ? '/admin' : ''}${suffix}`;
  }
}

export type { ClientOptions, EventStreamOptions, ExecBytesChunk, ExecSession, ExecWsInput, ExecWsOptions };

/** The `after` cursor of a `Link: <…?…&after=C>; rel="next"` header, or null. */
function nextCursor(link: string | string[] | undefined): string | null {
  const value = Array.isArray(link) ? link.join(', ') : link;
  const m = value ? /<([^>]*)>\s*;\s*rel="?next"?/.exec(value) : null;
  if (!m) return null;
  const q = m[1]!.indexOf('?');
  return q < 0 ? null : new URLSearchParams(m[1]!.slice(q + 1)).get('after');
}
