/**
 * A worker's operations on its runtimes and its provider's catalog (DESIGN.md §10, §16): each one
 * on a runtime this worker owns (runtimes.ts), each refused with 501 where its provider cannot.
 */
import { SbxError } from '../errors.js';
import { type EgressLists, parseEgress } from '../network/rules.js';
import { providerNamed, type RuntimeTarget, runtimeOf, type WorkerRuntimesDeps } from './runtimes.js';

export async function snapshotRuntime(
  deps: WorkerRuntimesDeps,
  t: RuntimeTarget & { name: string },
  signal: AbortSignal,
): Promise<{ image: string; kernel: string | null; size_bytes: number }> {
  const provider = runtimeOf(deps, t);
  if (!provider.snapshot) throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot take snapshots`);
  const made = await provider.snapshot(t.runtime_id, t.name, signal);
  return { image: made.image, kernel: made.kernel ?? null, size_bytes: made.size_bytes };
}

/** Fork (DESIGN §16): the copy is this worker's provider's; its forks are spawns here. */
export async function forkRuntime(
  deps: WorkerRuntimesDeps,
  t: RuntimeTarget & { fork: string },
  signal: AbortSignal,
): Promise<{ image: string }> {
  const provider = runtimeOf(deps, t);
  if (!provider.forkImage) throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot fork sandboxes`);
  return { image: (await provider.forkImage(t.runtime_id, t.fork, signal)).image };
}

export async function createVolume(deps: WorkerRuntimesDeps, v: { provider: string; name: string }, signal: AbortSignal): Promise<void> {
  const provider = providerNamed(deps, v.provider);
  if (!provider.createVolume)
    throw new SbxError('not_implemented', `provider ${v.provider} on worker ${deps.workerId} cannot make volumes`);
  await provider.createVolume(v.name, signal);
}

/** New egress lists of a filtered runtime (DESIGN §10): recorded, and the gateway closes what they no longer allow. */
export function updateEgress(deps: WorkerRuntimesDeps, e: RuntimeTarget & { egress: unknown }): EgressLists {
  const provider = runtimeOf(deps, e);
  const lists = parseEgress(e.egress);
  if (deps.state.getRuntime(e.sandbox_id)?.network !== 'filtered')
    throw new SbxError('conflict', `sandbox ${e.sandbox_id} is not filtered on worker ${deps.workerId}`);
  deps.state.setEgress(e.sandbox_id, lists);
  // The gateway forgets its cached lists and closes what the new ones no longer allow.
  provider.egress?.changed(e.sandbox_id);
  return lists;
}

/** DESIGN.md §16: the runtime's provider freezes or thaws it; 501 where it cannot. */
export async function pauseRuntime(
  deps: WorkerRuntimesDeps,
  t: RuntimeTarget,
  pause: boolean,
  signal: AbortSignal,
): Promise<{ sandbox_id: string; state: 'paused' | 'running' }> {
  const provider = runtimeOf(deps, t);
  const op = pause ? provider.pause : provider.resume;
  if (!op) throw new SbxError('not_implemented', `provider ${t.provider} on worker ${deps.workerId} cannot pause sandboxes`);
  await op.call(provider, t.runtime_id, signal);
  return { sandbox_id: t.sandbox_id, state: pause ? 'paused' : 'running' };
}
