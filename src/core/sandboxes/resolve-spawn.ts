/**
 * A spawn request with every default applied (spec 3.1; DESIGN.md §8, §10, §14–§16): provider,
 * shape, TTL, metadata, snapshot, volumes and where they pin it, network and egress, environment,
 * secrets and lifecycle. Validates; does not check limits (admission does).
 */
import { isPrivateOwner, ownerForQuota } from '../admission/owner.js';
import { parseDuration } from '../duration.js';
import { badRequest, SbxError } from '../errors.js';
import { canonicalProviderName } from '../providers/registry.js';
import { planSpawnSecrets } from '../secrets/service.js';
import type { SandboxDeps } from './deps.js';
import { resolveLifecycle } from './lifecycle.js';
import { spawnEgress } from './network-choice.js';
import type { SnapshotService } from './snapshots.js';
import type { ResolvedSpawn, SpawnInput } from './spawn-request.js';
import type { VolumeService } from './volumes.js';

/** What a spawn may start from or mount: the snapshot it names and the volumes. */
export interface SpawnCatalog {
  snapshots: Pick<SnapshotService, 'forSpawn'>;
  volumes: Pick<VolumeService, 'forSpawn' | 'placementOf'>;
}

/**
 * Applies defaults, validates sizes, TTL syntax, provider name (one this node or a registered
 * worker runs). Does not check limits.
 */
export async function resolveSpawn(
  deps: Pick<SandboxDeps, 'settings' | 'locator' | 'providers' | 'secrets'>,
  catalog: SpawnCatalog,
  input: SpawnInput,
): Promise<ResolvedSpawn> {
  // Either spelling of a provider's name; the sandbox records the canonical one (DESIGN §12).
  if (input.provider !== undefined) input = { ...input, provider: canonicalProviderName(input.provider) };
  const pool = deps.settings.pool;
  if (pool.enabled && (input.snapshot !== undefined || (input.volumes?.length ?? 0) > 0)) {
    throw new SbxError('not_implemented', 'pool sandboxes share one runtime with other users: snapshots and volumes need pool mode off');
  }
  let snapshot: string | null = null;
  let worker: string | null = null;
  if (input.snapshot !== undefined) {
    if (input.image !== undefined) throw badRequest('a spawn from a snapshot takes its image from the snapshot: leave image out');
    const snap = await catalog.snapshots.forSpawn(input.snapshot, input.provider, ownerForQuota(input.owner_id));
    input = { ...input, provider: snap.provider, image: snap.image };
    snapshot = snap.name;
    worker = snap.worker_id;
  }
  if (pool.enabled) {
    // DESIGN §8: a logical sandbox in a shared runtime, for one named tenant; the shape is the pool's.
    const owner = ownerForQuota(input.owner_id);
    if (!isPrivateOwner(owner))
      throw badRequest("pool mode needs the X-User-ID header: each sandbox is one user's workspace in a shared runtime");
    input = { ...input, image: pool.image, memory_mb: pool.memory_mb, vcpus: pool.vcpus, provider: pool.provider };
  }
  const d = deps.settings.defaults;
  const provider = await deps.locator.spawnProvider(input.provider);
  const memory_mb = input.memory_mb ?? d.memory_mb;
  const vcpus = input.vcpus ?? d.vcpus;
  if (!Number.isInteger(memory_mb) || memory_mb <= 0) throw badRequest('memory_mb must be a positive integer');
  if (!Number.isInteger(vcpus) || vcpus <= 0) throw badRequest('vcpus must be a positive integer');
  const ttl_ms = input.ttl !== undefined ? parseDuration(input.ttl, 'ttl') : d.ttl_ms;
  if (ttl_ms <= 0) throw badRequest('ttl must be positive');
  const metadata = input.metadata ?? {};
  for (const [k, v] of Object.entries(metadata)) {
    if (typeof v !== 'string') throw badRequest(`metadata.${k} must be a string`);
  }
  const volumes = input.volumes?.length ? await catalog.volumes.forSpawn(input.volumes, provider, ownerForQuota(input.owner_id)) : [];
  const volumeWorker = await catalog.volumes.placementOf(volumes);
  if (volumeWorker !== null) {
    if (worker !== null && worker !== volumeWorker)
      throw badRequest(
        `snapshot ${snapshot} is kept by worker ${worker} and the volumes by worker ${volumeWorker}: one sandbox cannot use both`,
      );
    worker = volumeWorker;
  }
  const { network, egress } = spawnEgress(input, d, pool.enabled);
  const secrets = await planSpawnSecrets(deps.secrets, input.secrets, network, ownerForQuota(input.owner_id));
  const env = checkEnv(input.env);
  for (const b of secrets) env[b.name] = b.placeholder;
  return {
    image: input.image ?? d.image,
    provider,
    memory_mb,
    vcpus,
    ttl_ms,
    metadata,
    owner_id: ownerForQuota(input.owner_id),
    template: input.template ?? null,
    network,
    egress,
    snapshot,
    volumes,
    worker,
    env,
    access_token_seed: checkSeed(input.access_token_seed),
    secrets,
    lifecycle: resolveLifecycle(input, d, pool.enabled, deps.providers.has(provider) ? deps.providers.get(provider) : null),
  };
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
const MAX_ENV = 256;

/** Environment of a spawn: POSIX-style names, string values without NUL; at most 256 entries. */
function checkEnv(env: Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  const entries = Object.entries(env ?? {});
  if (entries.length > MAX_ENV) throw badRequest(`at most ${MAX_ENV} environment variables`);
  for (const [k, v] of entries) {
    if (!ENV_NAME.test(k)) throw badRequest(`environment variable name ${JSON.stringify(k.slice(0, 64))} is not valid`);
    if (typeof v !== 'string' || v.includes('\0')) throw badRequest(`environment variable ${k} must be a string without NUL`);
    out[k] = v;
  }
  return out;
}

function checkSeed(seed: string | undefined): string | null {
  if (seed === undefined) return null;
  if (!/^[0-9a-f]{32,128}$/.test(seed)) throw badRequest('access token seed must be 32 to 128 hex digits');
  return seed;
}
