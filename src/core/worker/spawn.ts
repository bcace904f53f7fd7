/**
 * A spawn on a worker (DESIGN.md §7, §10): its refusals (draining, egress rules the worker cannot
 * enforce, a full worker), a retried spawn answered with the runtime it already made, and the new
 * runtime recorded in the worker's state.
 */
import { badRequest, SbxError, unavailable } from '../errors.js';
import { type EgressLists, parseEgress } from '../network/rules.js';
import type { Provider } from '../ports/index.js';
import { sandboxPath } from '../sandboxes/paths.js';
import type { SpawnSlots } from './capacity.js';
import { providerNamed, type WorkerRuntimesDeps } from './runtimes.js';

/** A spawn as the control plane asks it; what it leaves out comes from the worker's defaults. */
export interface WorkerSpawnParams {
  sandbox_id: string;
  provider?: string;
  image?: string;
  memory_mb?: number;
  vcpus?: number;
  metadata?: Record<string, string>;
  owner_id?: string | null;
  preview_token?: string;
  network?: 'none' | 'bridge' | 'filtered';
  egress?: unknown;
  snapshot?: string;
  fork?: string;
  volumes?: Array<{ name: string; mount_path: string }>;
}

export interface WorkerSpawnResult {
  sandbox_id: string;
  runtime_id: string;
  state: 'running';
  provider: string;
  worker_id: string;
  network?: string;
}

/** A spawn's params with every field it left out taken from this worker's defaults (DESIGN §7). */
export type SpawnRequest = ReturnType<typeof withSpawnDefaults>;

function withSpawnDefaults(deps: WorkerRuntimesDeps, s: WorkerSpawnParams) {
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

/** A filtered spawn on a provider of this worker that cannot enforce egress rules now → 501 with why. */
function refuseUnfiltered(deps: WorkerRuntimesDeps, provider: Provider): void {
  if (!provider.egress)
    throw new SbxError(
      'not_implemented',
      `network "filtered" needs a provider that enforces egress rules (docker); provider ${provider.name} on ` +
        `worker ${deps.workerId} cannot`,
    );
  const why = provider.egress.unavailable();
  if (why !== null) throw new SbxError('not_implemented', `network "filtered" is not available on worker ${deps.workerId}: ${why}`);
}

/** `worker.spawn`: refused while draining or full; a retry answers the runtime it already has. */
export async function spawnOnWorker(
  deps: WorkerRuntimesDeps,
  slots: SpawnSlots,
  params: WorkerSpawnParams,
  signal: AbortSignal,
): Promise<WorkerSpawnResult> {
  const s = withSpawnDefaults(deps, params);
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
  const slot = slots.take();
  try {
    return await spawnRuntime(deps, provider, s, egress, signal);
  } finally {
    slot.done();
  }
}

/** A new runtime on `provider`, recorded in the worker's state (the spawn's slot is held meanwhile). */
async function spawnRuntime(
  deps: WorkerRuntimesDeps,
  provider: Provider,
  s: SpawnRequest,
  egress: EgressLists | null,
  signal: AbortSignal,
): Promise<WorkerSpawnResult> {
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
