/**
 * What a worker does with its runtimes (DESIGN.md §7): which provider and runtime a call may reach
 * (ownership: only a runtime this worker started for that sandbox, by its state), their status,
 * their destroy. The worker RPC server (transports/worker-rpc/server) is its transport.
 */
import { notFound, SbxError } from '../errors.js';
import type { Provider } from '../ports/index.js';
import { canonicalProviderName } from '../providers/registry.js';
import type { WorkerState } from '../scheduler/worker-state-port.js';

/** What the worker's domain drives: its providers, its own state, its defaults and draining flag. */
export interface WorkerRuntimesDeps {
  workerId: string;
  /** Healthy-or-not providers this worker runs, by name. */
  providers: ReadonlyMap<string, Provider>;
  state: WorkerState;
  /** What a spawn that leaves them out gets (DESIGN §7): the default provider and this worker's `defaults.*`. */
  spawnDefaults: { provider: string; image: string; memory_mb: number; vcpus: number };
  /** True once the worker drains: spawns answer 503. */
  draining(): boolean;
}

/** A runtime a call names: its sandbox, provider and runtime id. */
export interface RuntimeTarget {
  sandbox_id: string;
  provider: string;
  runtime_id: string;
}

/** The provider by name, or 404. */
export function providerNamed(deps: WorkerRuntimesDeps, name: string): Provider {
  const p = deps.providers.get(canonicalProviderName(name));
  if (!p) throw notFound(`provider "${name}" is not run by worker ${deps.workerId}`);
  return p;
}

/** The provider of a runtime this worker started for that sandbox, or 404: a call never reaches another sandbox's runtime. */
export function runtimeOf(deps: WorkerRuntimesDeps, t: RuntimeTarget): Provider {
  const provider = providerNamed(deps, t.provider);
  const rt = deps.state.getRuntime(t.sandbox_id);
  if (!rt || rt.runtime_id !== t.runtime_id || rt.provider !== t.provider)
    throw notFound(`runtime ${t.runtime_id} of sandbox ${t.sandbox_id} is not on worker ${deps.workerId}`);
  return provider;
}

/** Destroys the runtime when it is this worker's; an unknown runtime counts as destroyed. */
export async function destroyRuntime(deps: WorkerRuntimesDeps, t: RuntimeTarget, signal: AbortSignal): Promise<void> {
  const provider = providerNamed(deps, t.provider);
  const rt = deps.state.getRuntime(t.sandbox_id);
  if (rt && rt.runtime_id === t.runtime_id) {
    await provider.destroy(t.runtime_id, signal);
    deps.state.deleteRuntime(t.sandbox_id);
  }
}

export interface RuntimeState {
  state: 'running' | 'paused' | 'destroyed' | 'error';
  error?: string;
}

/** What `worker.status` answers for one runtime: not this worker's (or not that runtime) is destroyed. */
export async function runtimeState(deps: WorkerRuntimesDeps, t: RuntimeTarget, signal: AbortSignal): Promise<RuntimeState> {
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

/** Provider status calls in flight for one status batch. */
const STATUS_BATCH_CONCURRENCY = 16;

/**
 * The status of each runtime, a bounded number at a time; one that cannot be judged (its provider
 * not run here, or failing) is `error` with why, never the whole batch's failure.
 */
export async function statusBatch(
  deps: WorkerRuntimesDeps,
  targets: RuntimeTarget[],
  signal: AbortSignal,
): Promise<Array<{ sandbox_id: string } & RuntimeState>> {
  const out: Array<{ sandbox_id: string } & RuntimeState> = new Array(targets.length);
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
