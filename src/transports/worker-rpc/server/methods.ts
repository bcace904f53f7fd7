/**
 * The worker's RPC methods (DESIGN.md §7), params already validated against the contract. Every
 * runtime method names its sandbox, provider and runtime; the pair must be one this worker
 * started (its state says so), else 404 — a call can never reach another sandbox's runtime.
 */
import type { Static } from '@sinclair/typebox';
import type * as C from '../../../contracts/worker-rpc.js';
import { formatDuration } from '../../../shared/duration.js';
import { badRequest, notFound, SbxError, unavailable } from '../../../core/errors.js';
import { parseEgress } from '../../../core/network/rules.js';
import { canonicalProviderName } from '../../../core/providers/registry.js';
import type { ExecSpec, Provider } from '../../../core/ports/index.js';
import { CappedOutput } from '../../../core/sandboxes/exec-output.js';
import { sandboxGlob, sandboxPath } from '../../../core/sandboxes/paths.js';
import type { ExecItem } from '../../../core/sandboxes/exec.js';
import type { SpawnSlots } from '../../../core/worker/capacity.js';
import type { RpcServerDeps } from './deps.js';
import { runOnRuntime, timeoutMs } from './exec.js';
import { readWindow, type UploadStaging } from './files.js';

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

/** The provider by name, or 404. */
export function providerNamed(deps: RpcServerDeps, name: string): Provider {
  const p = deps.providers.get(canonicalProviderName(name));
  if (!p) throw notFound(`provider "${name}" is not run by worker ${deps.workerId}`);
  return p;
}

/** The provider of a runtime this worker started for that sandbox, or 404. */
export function runtimeOf(deps: RpcServerDeps, t: Target): Provider {
  const provider = providerNamed(deps, t.provider);
  const rt = deps.state.getRuntime(t.sandbox_id);
  if (!rt || rt.runtime_id !== t.runtime_id || rt.provider !== t.provider)
    throw notFound(`runtime ${t.runtime_id} of sandbox ${t.sandbox_id} is not on worker ${deps.workerId}`);
  return provider;
}

/** A filtered spawn on a provider of this worker that cannot enforce egress rules now → 501 with why. */
function refuseUnfiltered(deps: RpcServerDeps, provider: Provider): void {
  if (!provider.egress)
    throw new SbxError(
      'not_implemented',
      `network "filtered" needs a provider that enforces egress rules (docker); provider ${provider.name} on ` +
        `worker ${deps.workerId} cannot`,
    );
  const why = provider.egress.unavailable();
  if (why !== null) throw new SbxError('not_implemented', `network "filtered" is not available on worker ${deps.workerId}: ${why}`);
}

/** A spawn's params with every field it left out taken from this worker's defaults (DESIGN §7). */
export type SpawnRequest = ReturnType<typeof withSpawnDefaults>;

function withSpawnDefaults(deps: RpcServerDeps, s: Static<typeof C.SpawnParams>) {
  const d = deps.spawnDefaults;
  return {
    ...s,
    provider: s.provider ?? d.provider,
    image: s.image ?? d.image,
    memory_mb: s.memory_mb ?? d.memory_mb,
    vcpus: s.vcpus ?? d.vcpus,
    metadata: s.metadata ?? {},
    owner_id: s.owner_id ?? null,
  };
}

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

export async function dispatch(deps: RpcServerDeps, local: ServerLocal, call: Call): Promise<unknown> {
  const p = call.params as never;
  const { signal } = call;
  const { staging } = local;
  switch (call.method) {
    case 'worker.spawn': {
      const s = withSpawnDefaults(deps, p as Static<typeof C.SpawnParams>);
      if (deps.draining()) throw unavailable(`worker ${deps.workerId} is draining and takes no new sandboxes`);
      const provider = providerNamed(deps, s.provider);
      // Egress rules (DESIGN §10) are parsed again here: the worker enforces only what it understood.
      const egress = s.network === 'filtered' ? parseEgress(s.egress ?? { allow: [], deny: [] }) : null;
      if (s.egress && s.network !== 'filtered') throw badRequest('egress rules need network "filtered"');
      if (s.network === 'filtered') refuseUnfiltered(deps, provider);
      const known = deps.state.getRuntime(s.sandbox_id);
      // A retried spawn of the same sandbox answers the runtime it already has.
      if (known && known.provider === s.provider)
        return { sandbox_id: s.sandbox_id, runtime_id: known.runtime_id, state: 'running', provider: s.provider, worker_id: deps.workerId };
      // Its capacity (DESIGN §7): runtimes kept plus spawns in flight, whatever control planes placed.
      const slot = local.slots.take();
      try {
        return await spawnRuntime(deps, provider, s, egress, signal);
      } finally {
        slot.done();
      }
    }
    case 'worker.destroy': {
      const t = p as Target;
      const provider = providerNamed(deps, t.provider);
      const rt = deps.state.getRuntime(t.sandbox_id);
      // An unknown runtime counts as destroyed.
      if (rt && rt.runtime_id === t.runtime_id) {
        await provider.destroy(t.runtime_id, signal);
        deps.state.deleteRuntime(t.sandbox_id);
      }
      return {};
    }
    case 'worker.status': {
      const t = p as Target;
      return { sandbox_id: t.sandbox_id, provider: t.provider, worker_id: deps.workerId, ...(await runtimeState(deps, t, signal)) };
    }
    case 'worker.status_batch':
      return { statuses: await statusBatch(deps, (p as Static<typeof C.StatusBatchParams>).sandboxes, signal) };
    case 'worker.exec': {
      const e = p as Static<typeof C.ExecParams>;
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
    case 'worker.snapshot': {
      const t = p as Target & { name: string };
      const provider = runtimeOf(deps, t);
      if (!provider.snapshot)
        throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot take snapshots`);
      const made = await provider.snapshot(t.runtime_id, t.name, signal);
      return { image: made.image, kernel: made.kernel ?? null, size_bytes: made.size_bytes };
    }
    case 'worker.snapshot_delete': {
      const d = p as { provider: string; name: string; image: string };
      await providerNamed(deps, d.provider).deleteSnapshot?.(d.name, d.image, signal);
      return {};
    }
    case 'worker.fork': {
      const t = p as Target & { fork: string };
      const provider = runtimeOf(deps, t);
      if (!provider.forkImage)
        throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot fork sandboxes`);
      return { image: (await provider.forkImage(t.runtime_id, t.fork, signal)).image };
    }
    case 'worker.fork_delete': {
      const d = p as { provider: string; fork: string };
      await providerNamed(deps, d.provider).deleteForkImage?.(d.fork, signal);
      return {};
    }
    case 'worker.volume_create': {
      const v = p as { provider: string; name: string };
      const provider = providerNamed(deps, v.provider);
      if (!provider.createVolume)
        throw new SbxError('not_implemented', `provider ${v.provider} on worker ${deps.workerId} cannot make volumes`);
      await provider.createVolume(v.name, signal);
      return {};
    }
    case 'worker.volume_delete': {
      const v = p as { provider: string; name: string };
      await providerNamed(deps, v.provider).deleteVolume?.(v.name, signal);
      return {};
    }
    case 'worker.volume_sizes': {
      const v = p as { provider: string; names: string[] };
      const provider = providerNamed(deps, v.provider);
      return { sizes: provider.volumeSizes ? await provider.volumeSizes(v.names, signal) : {} };
    }
    case 'worker.egress_update': {
      const e = p as Target & { egress: unknown };
      const provider = runtimeOf(deps, e);
      const lists = parseEgress(e.egress);
      if (deps.state.getRuntime(e.sandbox_id)?.network !== 'filtered')
        throw new SbxError('conflict', `sandbox ${e.sandbox_id} is not filtered on worker ${deps.workerId}`);
      deps.state.setEgress(e.sandbox_id, lists);
      // The gateway forgets its cached lists and closes what the new ones no longer allow.
      provider.egress?.changed(e.sandbox_id);
      return { egress: lists };
    }
    case 'worker.file_write': {
      const f = p as Static<typeof C.FileWriteParams>;
      await staging.write(runtimeOf(deps, f), f, sandboxPath(f.path), signal);
      return {};
    }
    case 'worker.file_read': {
      const f = p as Static<typeof C.FileReadParams>;
      return readWindow(runtimeOf(deps, f), f, sandboxPath(f.path), signal);
    }
    case 'worker.file_list': {
      const f = p as Target & { path: string };
      return { files: await runtimeOf(deps, f).listFiles(f.runtime_id, sandboxPath(f.path), signal) };
    }
    case 'worker.file_delete': {
      const f = p as Target & { path: string; recursive: boolean };
      await runtimeOf(deps, f).deleteFile(f.runtime_id, sandboxPath(f.path), f.recursive, signal);
      return {};
    }
    case 'worker.file_move': {
      const f = p as Target & { old_path: string; new_path: string };
      await runtimeOf(deps, f).moveFile(f.runtime_id, sandboxPath(f.old_path, 'old_path'), sandboxPath(f.new_path, 'new_path'), signal);
      return {};
    }
    case 'worker.file_chmod': {
      const f = p as Target & { path: string; mode: number };
      await runtimeOf(deps, f).chmod(f.runtime_id, sandboxPath(f.path), f.mode, signal);
      return {};
    }
    case 'worker.file_stat': {
      const f = p as Target & { path: string };
      return { file: await runtimeOf(deps, f).stat(f.runtime_id, sandboxPath(f.path), signal) };
    }
    case 'worker.file_glob': {
      const f = p as Target & { pattern: string };
      return { matches: await runtimeOf(deps, f).glob(f.runtime_id, sandboxGlob(f.pattern), signal) };
    }
    case 'worker.logs': {
      const l = p as Target & { lines: number; after?: number };
      const log = await runtimeOf(deps, l).logs(
        l.runtime_id,
        l.after !== undefined ? { lines: l.lines, after: l.after } : { lines: l.lines },
        signal,
      );
      return log.cursor !== undefined ? { lines: log.lines, cursor: log.cursor } : { lines: log.lines };
    }
    case 'worker.pause':
    case 'worker.resume': {
      // DESIGN.md §16: the runtime's provider freezes or thaws it; 501 where it cannot.
      const t = p as Target;
      const provider = runtimeOf(deps, t);
      const op = call.method === 'worker.pause' ? provider.pause : provider.resume;
      if (!op) throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot pause sandboxes`);
      await op.call(provider, t.runtime_id, signal);
      return { sandbox_id: t.sandbox_id, state: call.method === 'worker.pause' ? 'paused' : 'running' };
    }
    case 'worker.renew_lease': {
      // Fenced and recorded before dispatch: the renewed lease is now the newest this worker has seen.
      return { lease: call.lease };
    }
    case 'worker.shutdown': {
      deps.drain();
      return { status: 'draining' };
    }
    case 'worker.exec_stream':
    case 'worker.file_watch':
      // Served by the transport (streamed, or buffered chunks): never reaches here.
      throw notFound(`${call.method} is served as a stream`);
  }
}

type RuntimeState = Pick<Static<typeof C.StatusResult>, 'state' | 'error'>;

/** What `worker.status` answers for one runtime: not this worker's (or not that runtime) is destroyed. */
async function runtimeState(deps: RpcServerDeps, t: Target, signal: AbortSignal): Promise<RuntimeState> {
  const provider = providerNamed(deps, t.provider);
  const rt = deps.state.getRuntime(t.sandbox_id);
  if (!rt || rt.runtime_id !== t.runtime_id) return { state: 'destroyed' };
  const status = await provider.status(t.runtime_id, signal);
  return status === 'running' || status === 'paused'
    ? { state: status }
    : status === 'missing'
      ? { state: 'destroyed' }
      : { state: 'error', error: 'runtime stopped' };
}

/** Provider status calls in flight for one `worker.status_batch`. */
const STATUS_BATCH_CONCURRENCY = 16;

/**
 * `worker.status` of each runtime, a bounded number at a time; one that cannot be judged (its
 * provider not run here, or failing) is `error` with why, never the whole call's failure.
 */
export async function statusBatch(
  deps: RpcServerDeps,
  targets: Target[],
  signal: AbortSignal,
): Promise<Static<typeof C.StatusBatchResult>['statuses']> {
  const out: Static<typeof C.StatusBatchResult>['statuses'] = new Array(targets.length);
  let next = 0;
  const lane = async () => {
    while (next < targets.length) {
      const i = next++;
      const t = targets[i]!;
      signal.throwIfAborted();
      try {
        out[i] = { sandbox_id: t.sandbox_id, ...(await runtimeState(deps, t, signal)) };
      } catch (err) {
        if (signal.aborted) throw err;
        const why = err instanceof SbxError && err.code === 'not_found' ? err.message : `provider ${t.provider} failed`;
        out[i] = { sandbox_id: t.sandbox_id, state: 'error', error: why };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(STATUS_BATCH_CONCURRENCY, targets.length) }, lane));
  return out;
}

/** A new runtime on `provider`, recorded in the worker's state (the spawn's slot is held meanwhile). */
async function spawnRuntime(
  deps: RpcServerDeps,
  provider: Provider,
  s: SpawnRequest,
  egress: ReturnType<typeof parseEgress> | null,
  signal: AbortSignal,
): Promise<Static<typeof C.SpawnResult>> {
  const { runtime_id, network } = await provider.spawn(
    {
      sandbox_id: s.sandbox_id,
      image: s.image,
      memory_mb: s.memory_mb,
      vcpus: s.vcpus,
      metadata: s.metadata,
      owner_id: s.owner_id,
      ...(s.network ? { network: s.network } : {}),
      ...(s.snapshot ? { snapshot: s.snapshot } : {}),
      ...(s.fork ? { fork: s.fork } : {}),
      ...(s.volumes?.length
        ? { volumes: s.volumes.map((v) => ({ name: v.name, mount_path: sandboxPath(v.mount_path, 'volumes.mount_path') })) }
        : {}),
    },
    signal,
  );
  deps.state.putRuntime({
    sandbox_id: s.sandbox_id,
    provider: s.provider,
    runtime_id,
    preview_token: s.preview_token ?? null,
    network: s.network === 'filtered' ? 'filtered' : null,
    egress,
  });
  return {
    sandbox_id: s.sandbox_id,
    runtime_id,
    state: 'running',
    provider: s.provider,
    worker_id: deps.workerId,
    ...(network ? { network } : {}),
  };
}
