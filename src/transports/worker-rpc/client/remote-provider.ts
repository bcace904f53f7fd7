/**
 * The RemoteWorkers port over the worker RPC (DESIGN.md §7): each remote sandbox is a Provider
 * bound to its worker, so core treats it like a local one. Files travel in windows of at most
 * 4 MiB; a large write is staged on the worker under an upload id and renamed at the last window.
 */
import { randomBytes } from 'node:crypto';
import {
  RPC_FILE_WINDOW_BYTES,
  type FileReadResult,
  type ForkResultRpc,
  type RpcLease,
  type SnapshotResultRpc,
  type SpawnResult,
  type StatusResult,
  RPC_STATUS_BATCH,
  type StatusBatchResult,
} from '../../../contracts/worker-rpc.js';
import { SbxError } from '../../../core/errors.js';
import type {
  ConsoleLog,
  FileInfo,
  LeaseRecord,
  OpenedFile,
  PreviewUpstream,
  Provider,
  RuntimeStatus,
  WorkerRecord,
} from '../../../core/ports/index.js';
import { providerCapabilities } from '../../../core/scheduler/placement.js';
import type { RemoteRuntime, RemoteTarget, RemoteWorkers } from '../../../core/scheduler/remote-port.js';
import { fencedCalls } from './fenced.js';
import { execSocket, execStream, needsSocket } from './remote-exec.js';
import { watchStream } from './remote-watch.js';
import { RpcClient, type RpcClientOptions } from './rpc-client.js';

export type RemoteWorkersOptions = RpcClientOptions;

export function createRemoteWorkers(opts: RemoteWorkersOptions): RemoteWorkers {
  const rpc = new RpcClient(opts);
  return {
    unreachableReason: (w) => rpc.unreachableReason(w),
    provider: (w, target) => remoteProvider(rpc, w, target),
    statusBatch: (w, targets, signal) => statusBatch(rpc, w, targets, signal),
    async renewLease(w: WorkerRecord, lease: LeaseRecord, signal?: AbortSignal) {
      await rpc.call(w, 'worker.renew_lease', { resource_id: lease.resource_id }, { lease, signal });
    },
    async drain(w: WorkerRecord, signal?: AbortSignal) {
      await rpc.call(w, 'worker.shutdown', { mode: 'drain' }, { signal });
    },
    close: () => rpc.close(),
  };
}

const STATUS: Record<StatusResult['state'], RuntimeStatus> = {
  running: 'running',
  paused: 'paused',
  destroyed: 'missing',
  error: 'stopped',
};

/** `worker.status_batch` in pages of RPC_STATUS_BATCH; null when the worker lacks the method. */
async function statusBatch(
  rpc: RpcClient,
  w: WorkerRecord,
  targets: ReadonlyArray<RemoteRuntime>,
  signal?: AbortSignal,
): Promise<Map<string, RuntimeStatus> | null> {
  const out = new Map<string, RuntimeStatus>();
  for (let at = 0; at < targets.length; at += RPC_STATUS_BATCH) {
    const page = targets
      .slice(at, at + RPC_STATUS_BATCH)
      .map((t) => ({ sandbox_id: t.sandbox_id, provider: t.provider, runtime_id: t.runtime_id }));
    let r: StatusBatchResult;
    try {
      r = await rpc.call<StatusBatchResult>(w, 'worker.status_batch', { sandboxes: page }, { signal });
    } catch (err) {
      // An older worker: unknown method. Anything else is the caller's to judge.
      if (at === 0 && err instanceof SbxError && err.code === 'not_implemented') return null;
      throw err;
    }
    if (!r || !Array.isArray(r.statuses)) throw rpc.invalid(w);
    const asked = new Set(page.map((t) => t.sandbox_id));
    for (const s of r.statuses) {
      // Only what was asked, only known states: a worker cannot speak for other sandboxes.
      if (!s || !asked.has(s.sandbox_id) || !Object.hasOwn(STATUS, s.state)) continue;
      out.set(s.sandbox_id, STATUS[s.state]);
    }
  }
  return out;
}

/** One remote sandbox's calls: its worker, its target, and the fenced calls that carry its lease. */
interface Bound {
  rpc: RpcClient;
  w: WorkerRecord;
  target: RemoteTarget;
  at(runtimeId: string): { sandbox_id: string; provider: string; runtime_id: string };
  call<T>(method: string, params: Record<string, unknown>, signal?: AbortSignal, lease?: RpcLease | null): Promise<T>;
  fenced: ReturnType<typeof fencedCalls>;
}

function bound(rpc: RpcClient, w: WorkerRecord, target: RemoteTarget): Bound {
  return {
    rpc,
    w,
    target,
    at: (runtimeId) => ({ sandbox_id: target.sandbox_id, provider: target.provider, runtime_id: runtimeId }),
    call: <T>(method: string, params: Record<string, unknown>, signal?: AbortSignal, lease?: RpcLease | null) =>
      rpc.call<T>(w, method, params, { signal, lease }),
    // Calls that change the sandbox carry its lease (DESIGN §7 "Fencing"): required by spawn, destroy
    // and egress, sent when there is one by exec, file writes, moves, chmods, deletes and snapshots.
    fenced: fencedCalls(rpc, w, target),
  };
}

/** Snapshots and volumes (DESIGN §10) are kept by the worker's own provider, fork images too (DESIGN §16). */
function remoteCatalog(
  b: Bound,
): Pick<Provider, 'snapshot' | 'deleteSnapshot' | 'forkImage' | 'deleteForkImage' | 'createVolume' | 'deleteVolume' | 'volumeSizes'> {
  const { rpc, w, target, at, call, fenced } = b;
  return {
    async snapshot(runtimeId, name, signal) {
      const r = await fenced.call<SnapshotResultRpc>('worker.snapshot', { ...at(runtimeId), name }, signal, false);
      if (!r || typeof r.image !== 'string' || typeof r.size_bytes !== 'number') throw rpc.invalid(w);
      return { image: r.image, kernel: r.kernel ?? null, size_bytes: r.size_bytes };
    },
    async deleteSnapshot(name, image, signal) {
      await call('worker.snapshot_delete', { provider: target.provider, name, image }, signal);
    },
    // Fork (DESIGN §16): the copy is the worker's provider's, under the parent's lease; its forks are spawns there.
    async forkImage(runtimeId, fork, signal) {
      const r = await fenced.call<ForkResultRpc>('worker.fork', { ...at(runtimeId), fork }, signal, true);
      if (!r || typeof r.image !== 'string' || r.image === '') throw rpc.invalid(w);
      return { image: r.image };
    },
    async deleteForkImage(fork, signal) {
      await call('worker.fork_delete', { provider: target.provider, fork }, signal);
    },
    async createVolume(name, signal) {
      await call('worker.volume_create', { provider: target.provider, name }, signal);
    },
    async deleteVolume(name, signal) {
      await call('worker.volume_delete', { provider: target.provider, name }, signal);
    },
    async volumeSizes(names, signal) {
      const r = await call<{ sizes: Record<string, number | null> }>(
        'worker.volume_sizes',
        { provider: target.provider, names: [...names] },
        signal,
      );
      return r?.sizes ?? {};
    },
  };
}

/**
 * Windowed files (at most RPC_FILE_WINDOW_BYTES a call): a large write is staged on the worker
 * under an upload id and renamed at the last window; a read is pulled window by window.
 */
function remoteFiles(
  b: Bound,
): Pick<Provider, 'writeFile' | 'readFile' | 'openFile' | 'deleteFile' | 'listFiles' | 'moveFile' | 'chmod' | 'stat' | 'glob' | 'watch'> {
  const { rpc, w, at, call, fenced } = b;
  const readWindow = (runtimeId: string, path: string, offset: number, signal?: AbortSignal, maxBytes?: number) =>
    call<FileReadResult>(
      'worker.file_read',
      { ...at(runtimeId), path, offset, length: RPC_FILE_WINDOW_BYTES, ...(maxBytes !== undefined ? { max_bytes: maxBytes } : {}) },
      signal,
    );

  const openFile = async (runtimeId: string, path: string, signal?: AbortSignal, maxBytes?: number): Promise<OpenedFile> => {
    const first = await readWindow(runtimeId, path, 0, signal, maxBytes);
    const size = first.size;
    async function* body(): AsyncGenerator<Uint8Array> {
      let chunk = Buffer.from(first.content, 'base64');
      let offset = chunk.byteLength;
      let eof = first.eof;
      if (chunk.byteLength > 0) yield chunk;
      while (!eof && offset < size) {
        const next = await readWindow(runtimeId, path, offset, signal);
        chunk = Buffer.from(next.content, 'base64');
        if (chunk.byteLength === 0 && !next.eof) throw new SbxError('provider_error', `worker ${w.id} returned an empty file window`);
        offset += chunk.byteLength;
        eof = next.eof;
        if (chunk.byteLength > 0) yield chunk;
      }
      // The file changed size while read: what was read is what it is, never more than announced.
      if (offset !== size) throw new SbxError('provider_error', `file ${path} changed while it was read`);
    }
    return { size, body: body() };
  };

  return {
    async writeFile(runtimeId, path, content, mode, signal) {
      const base = { ...at(runtimeId), path, ...(mode !== undefined ? { mode } : {}) };
      if (content.byteLength <= RPC_FILE_WINDOW_BYTES) {
        await fenced.call('worker.file_write', { ...base, content: Buffer.from(content).toString('base64') }, signal, false);
        return;
      }
      const upload_id = randomBytes(12).toString('hex');
      for (let offset = 0; offset < content.byteLength; offset += RPC_FILE_WINDOW_BYTES) {
        const end = Math.min(content.byteLength, offset + RPC_FILE_WINDOW_BYTES);
        const window = Buffer.from(content.buffer, content.byteOffset + offset, end - offset).toString('base64');
        // Each window is fenced: a refused one changed nothing, so it can be sent again.
        await fenced.call(
          'worker.file_write',
          { ...base, content: window, upload_id, offset, truncate: offset === 0, final: end === content.byteLength },
          signal,
          false,
        );
      }
    },
    async readFile(runtimeId, path, signal, maxBytes) {
      const f = await openFile(runtimeId, path, signal, maxBytes);
      const parts: Uint8Array[] = [];
      for await (const c of f.body) parts.push(c);
      return Buffer.concat(parts);
    },
    openFile,
    async deleteFile(runtimeId, path, recursive, signal) {
      await fenced.call('worker.file_delete', { ...at(runtimeId), path, recursive }, signal, false);
    },
    async listFiles(runtimeId, path, signal) {
      return (await call<{ files: FileInfo[] }>('worker.file_list', { ...at(runtimeId), path }, signal)).files;
    },
    async moveFile(runtimeId, oldPath, newPath, signal) {
      await fenced.call('worker.file_move', { ...at(runtimeId), old_path: oldPath, new_path: newPath }, signal, false);
    },
    async chmod(runtimeId, path, mode, signal) {
      await fenced.call('worker.file_chmod', { ...at(runtimeId), path, mode }, signal, false);
    },
    async stat(runtimeId, path, signal) {
      return (await call<{ file: FileInfo }>('worker.file_stat', { ...at(runtimeId), path }, signal)).file;
    },
    async glob(runtimeId, pattern, signal) {
      return (await call<{ matches: string[] }>('worker.file_glob', { ...at(runtimeId), pattern }, signal)).matches;
    },
    watch: (runtimeId, path, opts, signal) => watchStream(rpc, w, at(runtimeId), path, opts.recursive, signal),
  };
}

function remoteProvider(rpc: RpcClient, w: WorkerRecord, target: RemoteTarget): Provider {
  const at = (runtimeId: string) => ({ sandbox_id: target.sandbox_id, provider: target.provider, runtime_id: runtimeId });
  const b = bound(rpc, w, target);
  const { call, fenced } = b;

  return {
    name: target.provider,
    // A terminal only where the worker's provider has one (its heartbeat says `tty:<provider>`).
    capabilities: ['spawn', 'exec', 'exec_stream', 'files', 'console', ...providerCapabilities(w, target.provider)],
    config: () => ({ runtime: 'remote', worker_id: w.id }),
    health: () => Promise.reject(new SbxError('not_implemented', 'the health of a remote provider is its worker heartbeat')),

    // DESIGN.md §10: a filtered sandbox's new lists go to the worker whose gateway enforces them.
    remoteEgress: {
      async update(runtimeId, lists, signal) {
        await fenced.call('worker.egress_update', { ...at(runtimeId), egress: { allow: lists.allow, deny: lists.deny } }, signal, true);
      },
    },

    // DESIGN.md §16: the worker's provider freezes or thaws the runtime; leased like a spawn.
    async pause(runtimeId, signal) {
      await fenced.call('worker.pause', at(runtimeId), signal, true);
    },
    async resume(runtimeId, signal) {
      await fenced.call('worker.resume', at(runtimeId), signal, true);
    },

    async spawn(spec, signal) {
      const params = {
        sandbox_id: spec.sandbox_id,
        provider: target.provider,
        image: spec.image,
        memory_mb: spec.memory_mb,
        vcpus: spec.vcpus,
        ttl: target.ttl ?? '',
        metadata: spec.metadata,
        owner_id: spec.owner_id,
        ...(spec.preview_token ? { preview_token: spec.preview_token } : {}),
        ...(spec.network ? { network: spec.network } : {}),
        ...(spec.network === 'filtered' ? { egress: spec.egress ?? { allow: [], deny: [] } } : {}),
        ...(spec.snapshot ? { snapshot: spec.snapshot } : {}),
        ...(spec.fork ? { fork: spec.fork } : {}),
        ...(spec.volumes?.length ? { volumes: spec.volumes } : {}),
      };
      const r = await fenced.call<SpawnResult>('worker.spawn', params, signal, true);
      if (!r || typeof r.runtime_id !== 'string' || r.runtime_id === '') throw rpc.invalid(w);
      return { runtime_id: r.runtime_id, ...(typeof r.network === 'string' && r.network !== '' ? { network: r.network } : {}) };
    },
    async destroy(runtimeId, signal) {
      try {
        await fenced.call('worker.destroy', at(runtimeId), signal, true);
      } catch (err) {
        if (err instanceof SbxError && err.code === 'not_found') return;
        throw err;
      }
    },
    ...remoteCatalog(b),
    async status(runtimeId, signal) {
      const r = await call<StatusResult>('worker.status', at(runtimeId), signal);
      const s = r && STATUS[r.state];
      if (!s) throw rpc.invalid(w);
      return s;
    },
    exec(runtimeId, spec, signal) {
      return needsSocket(spec)
        ? fenced.exec((lease) => execSocket(rpc, w, at(runtimeId), spec, signal, lease))
        : fenced.exec((lease) => execStream(rpc, w, at(runtimeId), spec, signal, lease));
    },
    ...remoteFiles(b),
    /**
     * Previews of a remote sandbox go through its worker (DESIGN.md §9): its RPC listener at
     * `/rpc/preview/<sandbox_id>/<port>/…`, with this control plane's worker credentials and the
     * RPC client's TLS.
     */
    async previewUpstream(_runtimeId, port) {
      const url = new URL(rpc.rpcUrl(w));
      const https = url.protocol === 'https:';
      const headers = rpc.headers(w);
      const upstream: PreviewUpstream = {
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: url.port ? Number(url.port) : https ? 443 : 80,
        path_prefix: `${url.pathname.replace(/\/+$/, '')}/preview/${encodeURIComponent(target.sandbox_id)}/${port}`,
        headers,
      };
      if (https) upstream.tls = rpc.tls ?? { rejectUnauthorized: true };
      return upstream;
    },
    async logs(runtimeId, query, signal) {
      const r = await call<ConsoleLog>(
        'worker.logs',
        { ...at(runtimeId), lines: query.lines, ...(query.after !== undefined ? { after: query.after } : {}) },
        signal,
      );
      return r.cursor !== undefined ? { lines: r.lines, cursor: r.cursor } : { lines: r.lines };
    },
  };
}
