/**
 * The custom HTTP provider (DESIGN.md §12): every Provider call forwarded to a backend that speaks
 * the contract in docs/providers/custom-http.md (StacyVM-compatible routes and bodies, `X-API-Key`
 * on every request). Statuses map to typed errors (404 not_found, 408 timeout, 429 resource_limit,
 * 503 unavailable, …, others provider_error) and a backend's body text never reaches a message.
 * Capabilities are what the backend says in `GET /health` beyond the anchor's base set.
 */
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import {
  FileList,
  GlobResponse,
  HealthResponse,
  LogsResponse,
  SpawnResponse,
  StatusResponse,
  type SpawnRequest,
  WireFileInfo,
  type WriteFileRequest,
} from '../../../contracts/custom-http.js';
import { SbxError } from '../../../core/errors.js';
import type {
  ConsoleLog,
  ConsoleQuery,
  ExecEvent,
  ExecSpec,
  FileInfo,
  OpenedFile,
  Provider,
  ProviderHealth,
  RuntimeStatus,
  SpawnResult,
  SpawnSpec,
} from '../../../core/ports/index.js';
import { execOverHttp } from './exec.js';
import { discard, HttpCaller, publicUrl, type Answer } from './http.js';

export interface CustomHttpOptions {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  retries?: number;
  backoffMs?: number;
}

/** What any contract backend offers (the anchor's routes). */
const BASE_CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'health'];
/** Extra capabilities a backend may announce in `GET /health` that this client can use. */
const OPTIONAL_CAPABILITIES = new Set(['console', 'container', 'microvm', 'exec_stdin']);

const RUNNING = new Set(['running', 'ready', 'started', 'active']);
const STOPPED = new Set(['stopped', 'exited', 'paused', 'creating', 'stopping', 'error', 'failed']);
const MISSING = new Set(['missing', 'destroyed', 'deleted', 'not_found', 'gone']);

const utf8 = new TextDecoder('utf-8', { fatal: true });
function isText(bytes: Uint8Array): boolean {
  try {
    utf8.decode(bytes);
    return true;
  } catch {
    return false;
  }
}

const octal = (mode: number) => `0${(mode & 0o7777).toString(8).padStart(3, '0')}`;

class CustomHttpProvider implements Provider {
  readonly name = 'custom_http';
  private caps: string[] = [...BASE_CAPABILITIES];
  /** True once a health answer set `caps`. */
  private asked = false;
  private readonly http: HttpCaller;

  constructor(private readonly opts: CustomHttpOptions) {
    this.http = new HttpCaller(opts);
  }

  get capabilities(): readonly string[] {
    return this.caps;
  }

  config(): Record<string, unknown> {
    return {
      runtime: 'custom-http',
      network_mode: 'backend',
      base_url: publicUrl(this.opts.baseUrl),
      timeout_ms: this.opts.timeoutMs,
      api_key: this.opts.apiKey ? 'set' : 'unset',
    };
  }

  async health(signal?: AbortSignal): Promise<ProviderHealth> {
    const started = performance.now();
    const latency = () => Math.round(performance.now() - started);
    try {
      const a = await this.http.call({ method: 'GET', path: '/health', idempotent: true, signal, what: 'health' });
      let info: HealthResponse = {};
      try {
        const text = await this.http.readText(a, { method: 'GET', path: '/health', what: 'health' }, 64 * 1024);
        // Any 2xx is healthy (the anchor's rule); a JSON body may add capabilities and a runtime count.
        if (text.trim().startsWith('{')) info = this.http.parse(text, HealthResponse, 'health');
      } finally {
        a.done();
      }
      this.asked = true;
      this.caps = [
        ...BASE_CAPABILITIES,
        ...(info.capabilities ?? []).filter((c) => OPTIONAL_CAPABILITIES.has(c) && !BASE_CAPABILITIES.includes(c)),
      ];
      const out: ProviderHealth = { healthy: true, latency_ms: latency() };
      if (info.runtime_count !== undefined) out.runtime_count = info.runtime_count;
      return out;
    } catch (err) {
      if (signal?.aborted) throw err;
      return {
        healthy: false,
        latency_ms: latency(),
        error: err instanceof SbxError ? err.message : 'custom-http health: the backend failed',
      };
    }
  }

  async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
    // Egress rules are enforced by sbx's own gateway (DESIGN.md §10), which a backend does not run.
    if (spec.network === 'filtered')
      throw new SbxError(
        'not_implemented',
        'custom-http sandboxes cannot be filtered: egress rules are enforced only on the docker provider',
      );
    const body: SpawnRequest = {
      image: spec.image,
      memory_mb: spec.memory_mb,
      vcpus: spec.vcpus,
      metadata: spec.metadata,
      sandbox_id: spec.sandbox_id,
    };
    if (spec.network) body.network = spec.network;
    const res = await this.http.json({ method: 'POST', path: '/spawn', json: body, signal, what: 'spawn' }, SpawnResponse);
    if (spec.network && res.network !== spec.network) {
      // A backend that ignores the field would give a network the sandbox does not claim: undo it.
      await this.destroy(res.id).catch(() => undefined);
      throw this.http.error('not_implemented', 'spawn', `the backend did not confirm network "${spec.network}"`);
    }
    return res.network ? { runtime_id: res.id, network: res.network } : { runtime_id: res.id };
  }

  async destroy(runtimeId: string, signal?: AbortSignal): Promise<void> {
    await this.http.send({
      method: 'DELETE',
      path: `/sandboxes/${encodeURIComponent(runtimeId)}`,
      idempotent: true,
      pass: [404, 410],
      signal,
      what: 'destroy',
    });
  }

  async status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus> {
    const a = await this.http.call({
      method: 'GET',
      path: `/status/${encodeURIComponent(runtimeId)}`,
      idempotent: true,
      pass: [404, 410],
      signal,
      what: 'status',
    });
    try {
      if (a.status === 404 || a.status === 410) {
        await a.body.dump({ limit: 64 * 1024 }).catch(() => undefined);
        return 'missing';
      }
      const res = this.http.parse(
        await this.http.readText(a, { method: 'GET', path: '/status', what: 'status' }, 64 * 1024),
        StatusResponse,
        'status',
      );
      const state = (res.state ?? 'running').toLowerCase();
      if (state === '' || RUNNING.has(state)) return 'running';
      if (STOPPED.has(state)) return 'stopped';
      if (MISSING.has(state)) return 'missing';
      throw this.http.error('provider_error', 'status', 'the backend answered a state sbx does not know');
    } finally {
      a.done();
    }
  }

  exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
    return this.execWithCaps(runtimeId, spec, signal);
  }

  /** Live stdin and signals need the backend's `exec_stdin`: ask `/health` first when it has not been asked yet. */
  private async *execWithCaps(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncGenerator<ExecEvent> {
    const live = spec.controls !== undefined || (spec.stdin !== undefined && !(spec.stdin instanceof Uint8Array));
    if (live && !this.asked && !signal.aborted) await this.health(signal).catch(() => undefined);
    yield* execOverHttp(this.http, runtimeId, spec, signal, this.caps.includes('exec_stdin'));
  }

  async writeFile(runtimeId: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void> {
    const text = isText(content);
    const body: WriteFileRequest = { sandbox_id: runtimeId, path, content: Buffer.from(content).toString(text ? 'utf8' : 'base64') };
    if (!text) body.encoding = 'base64';
    if (mode !== undefined) body.mode = octal(mode);
    await this.http.send({ method: 'POST', path: '/files', json: body, signal, what: 'write file' });
  }

  async readFile(runtimeId: string, path: string, signal?: AbortSignal, maxBytes?: number): Promise<Uint8Array> {
    const file = await this.openFile(runtimeId, path, signal, maxBytes);
    const chunks: Buffer[] = [];
    for await (const c of file.body) chunks.push(Buffer.from(c));
    return Buffer.concat(chunks);
  }

  async openFile(runtimeId: string, path: string, signal?: AbortSignal, maxBytes?: number): Promise<OpenedFile> {
    const what = 'read file';
    const a = await this.http.call({
      method: 'GET',
      path: '/files',
      query: { sandbox_id: runtimeId, path },
      idempotent: true,
      signal,
      what,
      wholeDeadline: false,
      accept: 'application/octet-stream',
    });
    const declared = Number(a.headers['content-length']);
    const size = Number.isFinite(declared) && declared >= 0 ? declared : undefined;
    if (size !== undefined && maxBytes !== undefined && size > maxBytes) {
      discard(a.body);
      throw new SbxError('payload_too_large', `file is ${size} bytes; the limit is ${maxBytes}`);
    }
    if (size !== undefined) return { size, body: this.bounded(a.body, size, what, signal) };
    // No length announced: read it here, within the limit, to know the size.
    const chunks: Buffer[] = [];
    let got = 0;
    for await (const c of this.bounded(a.body, maxBytes ?? Number.MAX_SAFE_INTEGER, what, signal)) {
      got += c.byteLength;
      chunks.push(Buffer.from(c));
    }
    const all = Buffer.concat(chunks);
    return { size: got, body: Readable.from(all.length > 0 ? [all] : []) };
  }

  /** The body's bytes, failing when they exceed `limit` or the connection drops; `return()` releases it. */
  private async *bounded(body: Answer['body'], limit: number, what: string, signal?: AbortSignal): AsyncGenerator<Uint8Array> {
    let got = 0;
    let complete = false;
    try {
      for await (const c of body) {
        got += (c as Buffer).length;
        if (got > limit) throw new SbxError('payload_too_large', `file is more than ${limit} bytes; the limit is ${limit}`);
        yield c as Buffer;
      }
      complete = true;
    } catch (err) {
      if (err instanceof SbxError) throw err;
      if (signal?.aborted) throw signal.reason;
      throw this.http.error('unavailable', what, 'lost the connection to the backend while reading');
    } finally {
      if (!complete) discard(body);
    }
  }

  async deleteFile(runtimeId: string, path: string, recursive: boolean, signal?: AbortSignal): Promise<void> {
    await this.http.send({
      method: 'DELETE',
      path: '/files',
      json: { sandbox_id: runtimeId, path, recursive },
      signal,
      what: 'delete file',
    });
  }

  async listFiles(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo[]> {
    const list = await this.http.json(
      { method: 'GET', path: '/files/list', query: { sandbox_id: runtimeId, path }, idempotent: true, signal, what: 'list files' },
      FileList,
    );
    return list.map((f) => this.fileInfo(f, 'list files')).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async moveFile(runtimeId: string, oldPath: string, newPath: string, signal?: AbortSignal): Promise<void> {
    await this.http.send({
      method: 'POST',
      path: '/files/move',
      json: { sandbox_id: runtimeId, old_path: oldPath, new_path: newPath },
      signal,
      what: 'move file',
    });
  }

  async chmod(runtimeId: string, path: string, mode: number, signal?: AbortSignal): Promise<void> {
    await this.http.send({
      method: 'POST',
      path: '/files/chmod',
      json: { sandbox_id: runtimeId, path, mode: octal(mode) },
      signal,
      what: 'chmod',
    });
  }

  async stat(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo> {
    const f = await this.http.json(
      { method: 'GET', path: '/files/stat', query: { sandbox_id: runtimeId, path }, idempotent: true, signal, what: 'stat' },
      WireFileInfo,
    );
    return this.fileInfo(f, 'stat');
  }

  async glob(runtimeId: string, pattern: string, signal?: AbortSignal): Promise<string[]> {
    const list = await this.http.json(
      { method: 'GET', path: '/files/glob', query: { sandbox_id: runtimeId, pattern }, idempotent: true, signal, what: 'glob' },
      GlobResponse,
    );
    return [...list].sort();
  }

  async logs(runtimeId: string, query: ConsoleQuery, signal?: AbortSignal): Promise<ConsoleLog> {
    const q = { sandbox_id: runtimeId, lines: query.lines, after: query.after };
    const res = await this.http.json({ method: 'GET', path: '/logs', query: q, idempotent: true, signal, what: 'logs' }, LogsResponse);
    return res.cursor === undefined ? { lines: res.lines } : { lines: res.lines, cursor: res.cursor };
  }

  /** A backend's FileInfo (snake_case or the anchor's Go names) in sbx's shape; incomplete is provider_error. */
  private fileInfo(f: WireFileInfo, what: string): FileInfo {
    const path = f.path ?? f.Path;
    const mode = f.mode ?? f.Mode;
    const size = f.size ?? f.Size;
    const isDir = f.is_dir ?? f.IsDir;
    const modTime = f.mod_time ?? f.ModTime;
    if (path === undefined || !path.startsWith('/') || mode === undefined || size === undefined || isDir === undefined) {
      throw this.http.error('provider_error', what, 'the backend answered a file description without path, size, mode or is_dir');
    }
    const bits = /^0?[0-7]{3,4}$/.test(mode) ? parseInt(mode, 8) : Number.NaN;
    if (!Number.isFinite(bits)) throw this.http.error('provider_error', what, 'the backend answered a file mode that is not octal');
    const time =
      modTime !== undefined && Number.isFinite(Date.parse(modTime))
        ? new Date(Date.parse(modTime)).toISOString()
        : new Date(0).toISOString();
    return { name: f.name ?? (path === '/' ? '/' : posix.basename(path)), path, size, is_dir: isDir, mod_time: time, mode: octal(bits) };
  }

  async close(): Promise<void> {
    await this.http.close();
  }
}

export function createCustomHttpProvider(opts: CustomHttpOptions): Provider {
  return new CustomHttpProvider(opts);
}
