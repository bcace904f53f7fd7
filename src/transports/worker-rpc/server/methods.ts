/**
 * The worker's RPC methods (DESIGN.md §7), params already validated against the contract: one table
 * keyed by the contract's method names, each entry the transport's side of one operation of the
 * worker's domain (core/worker: ownership, spawn and its refusals, status, operations, exec). Every
 * runtime method names its sandbox, provider and runtime; the pair must be one this worker started
 * (its state says so), else 404 — a call can never reach another sandbox's runtime.
 */
import type { Static } from '@sinclair/typebox';
import type * as C from '../../../contracts/worker-rpc.js';
import { notFound, SbxError } from '../../../core/errors.js';
import type { ExecSpec } from '../../../core/ports/index.js';
import { CappedOutput } from '../../../core/sandboxes/exec-output.js';
import type { ExecItem } from '../../../core/sandboxes/exec.js';
import { sandboxGlob, sandboxPath } from '../../../core/sandboxes/paths.js';
import type { SpawnSlots } from '../../../core/worker/capacity.js';
import { runOnRuntime, timeoutMs } from '../../../core/worker/exec.js';
import { createVolume, forkRuntime, pauseRuntime, snapshotRuntime, updateEgress } from '../../../core/worker/operations.js';
import { destroyRuntime, providerNamed, runtimeOf, runtimeState, statusBatch } from '../../../core/worker/runtimes.js';
import { spawnOnWorker } from '../../../core/worker/spawn.js';
import { formatDuration } from '../../../shared/duration.js';
import type { RpcServerDeps } from './deps.js';
import { readWindow, type UploadStaging } from './files.js';

export { providerNamed, runtimeOf, statusBatch } from '../../../core/worker/runtimes.js';

type Target = Static<typeof C.RpcTarget>;

export interface Call {
  method: C.RpcMethod;
  params: Record<string, unknown>;
  /** The call's lease, already fenced (fencing.ts); null when served without one. */
  lease: C.RpcLease | null;
  signal: AbortSignal;
}

/** What the server keeps across calls: staged uploads, spawns in flight. */
export interface ServerLocal {
  staging: UploadStaging;
  slots: SpawnSlots;
}

/** What a buffered `worker.exec` keeps per stream when the worker names no cap (`defaults.max_exec_output_mb`'s default). */
const DEFAULT_EXEC_OUTPUT_BYTES = 16 * 1024 * 1024;

/** The exec spec of `worker.exec`/`exec_stream` params. */
export function execSpec(p: Static<typeof C.ExecParams>): ExecSpec {
  const spec: ExecSpec = { command: p.command, args: p.args, mode: p.mode, env: p.env };
  if (p.workdir !== undefined) spec.workdir = sandboxPath(p.workdir, 'workdir');
  if (p.stdin !== undefined) spec.stdin = Buffer.from(p.stdin, 'base64');
  return spec;
}

/** A command's items: output, then exactly one exit. */
export function execItems(deps: RpcServerDeps, p: Static<typeof C.ExecParams>, signal: AbortSignal): AsyncGenerator<ExecItem> {
  const provider = runtimeOf(deps, p);
  return runOnRuntime(provider, p.runtime_id, execSpec(p), timeoutMs(p.timeout), signal);
}

/** `worker.exec`: the command run to its end, its output kept up to the cap; a timeout is 504 with what it wrote. */
async function bufferedExec(deps: RpcServerDeps, e: Static<typeof C.ExecParams>, signal: AbortSignal) {
  const output = new CappedOutput(deps.maxExecOutputBytes ?? DEFAULT_EXEC_OUTPUT_BYTES);
  for await (const item of execItems(deps, e, signal)) {
    if (item.stream === 'exit') {
      const body = {
        sandbox_id: e.sandbox_id,
        exit_code: item.exit_code,
        stdout: Buffer.from(output.result('stdout')).toString('base64'),
        stderr: Buffer.from(output.result('stderr')).toString('base64'),
        duration: formatDuration(item.duration_ms),
        encoding: 'base64',
        ...(output.truncated ? { truncated: true } : {}),
      };
      if (item.timed_out) throw new SbxError('timeout', `command timed out after ${e.timeout}`, body);
      return body;
    }
    output.add(item.stream, item.data);
  }
  throw new SbxError('provider_error', 'exec ended without an exit status');
}

interface Ctx {
  deps: RpcServerDeps;
  local: ServerLocal;
  call: Call;
  signal: AbortSignal;
}

type Handler = (ctx: Ctx, p: never) => Promise<unknown> | unknown;
/** The methods served as streams by the transport itself (app.ts): never in the table. */
type StreamMethod = 'worker.exec_stream' | 'worker.file_watch';

/** One entry per method of the contract but the streamed ones: the compiler checks none is missing. */
const METHODS: Record<Exclude<C.RpcMethod, StreamMethod>, Handler> = {
  'worker.spawn': ({ deps, local, signal }, p: Static<typeof C.SpawnParams>) => spawnOnWorker(deps, local.slots, p, signal),
  'worker.destroy': async ({ deps, signal }, t: Target) => (await destroyRuntime(deps, t, signal), {}),
  'worker.status': async ({ deps, signal }, t: Target) => ({
    sandbox_id: t.sandbox_id,
    provider: t.provider,
    worker_id: deps.workerId,
    ...(await runtimeState(deps, t, signal)),
  }),
  'worker.status_batch': async ({ deps, signal }, p: Static<typeof C.StatusBatchParams>) => ({
    statuses: await statusBatch(deps, p.sandboxes, signal),
  }),
  'worker.exec': ({ deps, signal }, e: Static<typeof C.ExecParams>) => bufferedExec(deps, e, signal),
  'worker.snapshot': ({ deps, signal }, t: Target & { name: string }) => snapshotRuntime(deps, t, signal),
  'worker.snapshot_delete': async ({ deps, signal }, d: { provider: string; name: string; image: string }) => {
    await providerNamed(deps, d.provider).deleteSnapshot?.(d.name, d.image, signal);
    return {};
  },
  'worker.fork': ({ deps, signal }, t: Target & { fork: string }) => forkRuntime(deps, t, signal),
  'worker.fork_delete': async ({ deps, signal }, d: { provider: string; fork: string }) => {
    await providerNamed(deps, d.provider).deleteForkImage?.(d.fork, signal);
    return {};
  },
  'worker.volume_create': async ({ deps, signal }, v: { provider: string; name: string }) => (await createVolume(deps, v, signal), {}),
  'worker.volume_delete': async ({ deps, signal }, v: { provider: string; name: string }) => {
    await providerNamed(deps, v.provider).deleteVolume?.(v.name, signal);
    return {};
  },
  'worker.volume_sizes': async ({ deps, signal }, v: { provider: string; names: string[] }) => {
    const provider = providerNamed(deps, v.provider);
    return { sizes: provider.volumeSizes ? await provider.volumeSizes(v.names, signal) : {} };
  },
  'worker.egress_update': ({ deps }, e: Target & { egress: unknown }) => ({ egress: updateEgress(deps, e) }),
  'worker.file_write': async ({ deps, local, signal }, f: Static<typeof C.FileWriteParams>) => {
    await local.staging.write(runtimeOf(deps, f), f, sandboxPath(f.path), signal);
    return {};
  },
  'worker.file_read': ({ deps, signal }, f: Static<typeof C.FileReadParams>) =>
    readWindow(runtimeOf(deps, f), f, sandboxPath(f.path), signal),
  'worker.file_list': async ({ deps, signal }, f: Target & { path: string }) => ({
    files: await runtimeOf(deps, f).listFiles(f.runtime_id, sandboxPath(f.path), signal),
  }),
  'worker.file_delete': async ({ deps, signal }, f: Target & { path: string; recursive: boolean }) => {
    await runtimeOf(deps, f).deleteFile(f.runtime_id, sandboxPath(f.path), f.recursive, signal);
    return {};
  },
  'worker.file_move': async ({ deps, signal }, f: Target & { old_path: string; new_path: string }) => {
    await runtimeOf(deps, f).moveFile(f.runtime_id, sandboxPath(f.old_path, 'old_path'), sandboxPath(f.new_path, 'new_path'), signal);
    return {};
  },
  'worker.file_chmod': async ({ deps, signal }, f: Target & { path: string; mode: number }) => {
    await runtimeOf(deps, f).chmod(f.runtime_id, sandboxPath(f.path), f.mode, signal);
    return {};
  },
  'worker.file_stat': async ({ deps, signal }, f: Target & { path: string }) => ({
    file: await runtimeOf(deps, f).stat(f.runtime_id, sandboxPath(f.path), signal),
  }),
  'worker.file_glob': async ({ deps, signal }, f: Target & { pattern: string }) => ({
    matches: await runtimeOf(deps, f).glob(f.runtime_id, sandboxGlob(f.pattern), signal),
  }),
  'worker.logs': async ({ deps, signal }, l: Target & { lines: number; after?: number }) => {
    const log = await runtimeOf(deps, l).logs(
      l.runtime_id,
      l.after !== undefined ? { lines: l.lines, after: l.after } : { lines: l.lines },
      signal,
    );
    return log.cursor !== undefined ? { lines: log.lines, cursor: log.cursor } : { lines: log.lines };
  },
  'worker.pause': ({ deps, signal }, t: Target) => pauseRuntime(deps, t, true, signal),
  'worker.resume': ({ deps, signal }, t: Target) => pauseRuntime(deps, t, false, signal),
  // Fenced and recorded before dispatch: the renewed lease is now the newest this worker has seen.
  'worker.renew_lease': ({ call }) => ({ lease: call.lease }),
  'worker.shutdown': ({ deps }) => {
    deps.drain();
    return { status: 'draining' };
  },
};

export async function dispatch(deps: RpcServerDeps, local: ServerLocal, call: Call): Promise<unknown> {
  const handler = Object.hasOwn(METHODS, call.method) ? METHODS[call.method as keyof typeof METHODS] : undefined;
  // Served by the transport (streamed, or buffered chunks): never reaches here.
  if (!handler) throw notFound(`${call.method} is served as a stream`);
  return handler({ deps, local, call, signal: call.signal }, call.params as never);
}
