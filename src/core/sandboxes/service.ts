import type { Admission } from '../admission/admission.js';
import { isPrivateOwner, ownerForQuota } from '../admission/owner.js';
import { parseDuration } from '../duration.js';
import { formatDuration } from '../../shared/duration.js';
import { badRequest, conflict, isSbxError, notFound, SbxError, unavailable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { canonicalProviderName, type ProviderRegistry } from '../providers/registry.js';
import type {
  Clock,
  IdSource,
  Provider,
  RuntimeStatus,
  SandboxRecord,
  SandboxStore,
  SnapshotStore,
  VolumeMount,
  VolumeStore,
} from '../ports/index.js';
import type { RuntimeLocator } from '../scheduler/locator.js';
import type { CoreSettings } from '../settings.js';
import { ownerVisible, type Caller } from './caller.js';
import { guardRuntime } from './runtime-guard.js';
import type { ListPosition } from './cursor.js';
import { sandboxPages } from './pages.js';
import { Reaper, type ReapOptions } from './reaper.js';
import { SnapshotService } from './snapshots.js';
import { createSandbox } from './spawn.js';
import { parseEgress, type EgressLists } from '../network/rules.js';
import { spawnEgress } from './network-choice.js';
import { VolumeService } from './volumes.js';
import type { WarmPool } from './warm.js';
import { Teardowns, type TeardownRetry } from './teardown.js';
import { ForkService, type ForkSecretsHook } from './fork.js';
import { planSpawnSecrets, type PlannedBinding, type SecretService } from '../secrets/service.js';
import { PauseService } from './pause.js';
import { resolveLifecycle, type Lifecycle } from './lifecycle.js';

export interface SpawnInput {
  image?: string;
  provider?: string;
  memory_mb?: number;
  vcpus?: number;
  ttl?: string;
  metadata?: Record<string, string>;
  owner_id?: string | null;
  template?: string | null;
  network?: string;
  /** Egress allow and deny lists (DESIGN.md §10): given without `network`, it means `filtered`. */
  egress?: unknown;
  /** Start from this snapshot (DESIGN.md §10): it fixes provider and image. */
  snapshot?: string;
  volumes?: ReadonlyArray<{ name: string; mount_path: string }>;
  /** Environment of every command (DESIGN.md §14); names are checked. */
  env?: Record<string, string>;
  /** Seed of the envd access token (DESIGN.md §14), hex; made by the caller that hands the token out. */
  access_token_seed?: string;
  /** Secrets to bind (DESIGN.md §15): names in the owner's namespace; needs network `filtered`. */
  secrets?: unknown;
  /** Pause after this long without activity (DESIGN.md §16); `0s` = never; absent: `defaults.auto_pause`. */
  auto_pause?: string;
  /** What the TTL does (DESIGN.md §16): `destroy` (default) or `pause`. */
  on_expire?: 'destroy' | 'pause';
}

/** A spawn request with every default applied. */
export interface ResolvedSpawn {
  image: string;
  provider: string;
  memory_mb: number;
  vcpus: number;
  ttl_ms: number;
  metadata: Record<string, string>;
  owner_id: string | null;
  template: string | null;
  /** `none`, `bridge` or `filtered`; null: the provider's default. */
  network: 'none' | 'bridge' | 'filtered' | null;
  /** The canonical egress lists of a `filtered` spawn; null for every other network. */
  egress: EgressLists | null;
  /** The snapshot it starts from (`image` is then the snapshot's), or null. */
  snapshot: string | null;
  /** Checked volumes to mount; empty for none. */
  volumes: VolumeMount[];
  /** The worker that must run it (where its snapshot or volumes are kept); null: placement chooses. */
  worker: string | null;
  /** Checked environment of every command; empty for none. */
  env: Record<string, string>;
  /** Seed of the envd access token, or null for none. */
  access_token_seed: string | null;
  /** Auto-pause and what the TTL does (DESIGN.md §16). */
  lifecycle: Lifecycle;
  /** Secrets bound (DESIGN.md §15), each with its placeholder (also in `env`); empty for none. */
  secrets: PlannedBinding[];
  /** A fork (DESIGN.md §16): the parent and the fork image it starts from; absent for every other spawn. */
  fork?: ForkOrigin;
}

/** Where a fork starts from: its parent sandbox and the fork image the parent's provider made. */
export interface ForkOrigin {
  parent: SandboxRecord;
  /** The fork image's name (`SpawnSpec.fork`) and the provider's reference to it (`SpawnSpec.image`). */
  name: string;
  image: string;
}

export interface SandboxDeps {
  /** Sandbox rows, snapshots and volumes: leases and workers are the locator's. */
  store: SandboxStore & SnapshotStore & VolumeStore;
  providers: ProviderRegistry;
  /** Where runtimes live: this node's providers or a remote worker (placement, leases). */
  locator: RuntimeLocator;
  admission: Admission;
  bus: EventBus;
  clock: Clock;
  ids: IdSource;
  settings: CoreSettings;
  /** Operator-facing warnings that no caller receives (compose passes the logger). */
  warn?: (fields: Record<string, unknown>, message: string) => void;
  /** The sandbox's preview token when previews need one (`server.preview_auth`), sent to its worker. */
  previewToken?: (sandboxId: string) => string | undefined;
  /** Warm runtimes to claim (DESIGN.md §11); set once the pool exists (it resolves shapes with this service). */
  warm?: WarmPool;
  /** Retry of a runtime's destroy (tests shorten it). */
  destroyRetry?: TeardownRetry;
  /** Secret bindings a fork gets, with placeholders of its own (DESIGN.md §15, §16); absent until secrets exist. */
  forkSecrets?: ForkSecretsHook;
  /** Secrets a spawn binds (DESIGN.md §15); absent: a spawn naming secrets answers 501. */
  secrets?: Pick<SecretService, 'plan' | 'record' | 'placeholderEnv'>;
}

const GONE = new Set(['destroyed', 'expired']);
/** Bound on a worker's status answer on `GET` (DESIGN.md §7); the cached record is served after it. */
const REMOTE_STATUS_TIMEOUT_MS = 2_000;

/**
 * Sandbox lifecycle (spec 3.1): spawn, get, list, extend, destroy, prune, reap. Every mutation is
 * persisted before the call resolves. A sandbox past `expires_at` is gone for every read at once,
 * whatever the reaper's timing (DESIGN.md §3 "Expiry").
 */
export class SandboxService {
  /** Sandboxes already reported as stranded, so the reaper warns once, not every pass. */
  private readonly warnedStranded = new Set<string>();
  private readonly teardowns: Teardowns;
  private readonly reaper = new Reaper(this);
  /** Snapshots of this service's sandboxes (DESIGN.md §10). */
  readonly snapshots: SnapshotService;
  /** Volumes its sandboxes mount (DESIGN.md §10). */
  readonly volumes: VolumeService;
  /** Forks of its sandboxes (DESIGN.md §16). */
  readonly forks: ForkService;
  /** Pause, resume, auto-pause and the activity that holds it off (DESIGN.md §16). */
  readonly pauses: PauseService;

  constructor(readonly deps: SandboxDeps) {
    this.forks = new ForkService(this);
    this.teardowns = new Teardowns(deps, deps.destroyRetry, (rec) => this.forks.released(rec));
    this.snapshots = new SnapshotService(deps.store, this);
    this.volumes = new VolumeService(deps.store, this);
    this.pauses = new PauseService(this);
  }

  /** True while this process tears the sandbox down: its operations then answer not_found. */
  destroying(id: string): boolean {
    return this.teardowns.destroying(id);
  }

  /**
   * Applies defaults, validates sizes, TTL syntax, provider name (one this node or a registered
   * worker runs). Does not check limits.
   */
  async resolveSpawn(input: SpawnInput): Promise<ResolvedSpawn> {
    // Either spelling of a provider's name; the sandbox records the canonical one (DESIGN §12).
    if (input.provider !== undefined) input = { ...input, provider: canonicalProviderName(input.provider) };
    const pool = this.deps.settings.pool;
    if (pool.enabled && (input.snapshot !== undefined || (input.volumes?.length ?? 0) > 0)) {
      throw new SbxError('not_implemented', 'pool sandboxes share one runtime with other users: snapshots and volumes need pool mode off');
    }
    let snapshot: string | null = null;
    let worker: string | null = null;
    if (input.snapshot !== undefined) {
      if (input.image !== undefined) throw badRequest('a spawn from a snapshot takes its image from the snapshot: leave image out');
      const snap = await this.snapshots.forSpawn(input.snapshot, input.provider, ownerForQuota(input.owner_id));
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
    const d = this.deps.settings.defaults;
    const provider = await this.deps.locator.spawnProvider(input.provider);
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
    const volumes = input.volumes?.length ? await this.volumes.forSpawn(input.volumes, provider, ownerForQuota(input.owner_id)) : [];
    const volumeWorker = await this.volumes.placementOf(volumes);
    if (volumeWorker !== null) {
      if (worker !== null && worker !== volumeWorker)
        throw badRequest(
          `snapshot ${snapshot} is kept by worker ${worker} and the volumes by worker ${volumeWorker}: one sandbox cannot use both`,
        );
      worker = volumeWorker;
    }
    const { network, egress } = spawnEgress(input, d, pool.enabled);
    const secrets = await planSpawnSecrets(this.deps.secrets, input.secrets, network, ownerForQuota(input.owner_id));
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
      lifecycle: resolveLifecycle(input, d, pool.enabled, this.deps.providers.has(provider) ? this.deps.providers.get(provider) : null),
    };
  }

  /** Spawns a sandbox: admission, provider, store, events. */
  async spawn(input: SpawnInput, signal?: AbortSignal): Promise<SandboxRecord> {
    const req = await this.resolveSpawn(input);
    const unhold = this.volumes.hold(req.volumes);
    try {
      const ticket = await this.deps.admission.admit({ owner_id: req.owner_id, ttl_ms: req.ttl_ms }, signal);
      try {
        const rec = await createSandbox(this.deps, req, signal, ticket);
        this.pauses.watch(rec);
        return rec;
      } finally {
        ticket.release();
      }
    } finally {
      unhold();
    }
  }

  /** A live sandbox visible to the caller, or `not_found`. */
  async get(id: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.deps.store.getSandbox(id);
    if (!rec || !this.visible(rec, caller) || GONE.has(rec.state) || this.pastTtl(rec)) {
      throw notFound(`sandbox ${id} not found`);
    }
    return rec;
  }

  /**
   * `GET` of one sandbox (spec 4.11 rule 8): a remote sandbox's worker is asked for its runtime's
   * state, bounded at 2 s, and what changed is stored — a stopped runtime moves the sandbox to
   * `error` (`sandbox.error`), a vanished one to `destroyed` (reason `runtime_lost`, lease
   * released, so the answer is 404). A worker that does not answer leaves the cached record.
   */
  async refresh(id: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const { locator, store, bus, clock } = this.deps;
    if (locator.isLocal(rec) || rec.state !== 'running' || !rec.runtime_id || this.destroying(id)) return rec;
    const worker = await locator.workerOf(rec);
    if (!worker) return rec;
    let status: RuntimeStatus;
    try {
      status = await locator.remoteProvider(worker, rec).status(rec.runtime_id, AbortSignal.timeout(REMOTE_STATUS_TIMEOUT_MS));
    } catch {
      return rec;
    }
    if (status === 'running' || status === 'paused') return rec;
    const common = { sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
    const now = clock.now().toISOString();
    if (status === 'stopped') {
      const updated = await store.updateSandbox(rec.id, { state: 'error', updated_at: now });
      bus.publish({ type: 'sandbox.error', ...common, data: { provider: rec.provider, operation: 'status', reason: 'runtime stopped' } });
      return updated ?? rec;
    }
    await store.updateSandbox(rec.id, { state: 'destroyed', updated_at: now });
    await locator.release(rec).catch(() => false);
    bus.publish({ type: 'sandbox.destroyed', ...common, data: { reason: 'runtime_lost' } });
    throw notFound(`sandbox ${id} not found`);
  }

  /** How many sandboxes a list shows on `provider` (every owner's): a count by index, never a listing (DESIGN.md §13). */
  async countOfProvider(provider: string): Promise<number> {
    return this.deps.store.countOfProvider(this.deps.clock.now().toISOString(), provider);
  }

  /**
   * Live sandboxes visible to the caller, oldest first (by created_at, then id). Visibility and the
   * TTL apply in the store query, so `limit` gives full pages; `id_prefix` keeps ids starting with it.
   */
  async list(caller: Caller, query: { id_prefix?: string; limit?: number } = {}): Promise<SandboxRecord[]> {
    return (await this.page(caller, query)).items;
  }

  /**
   * One page of `list` (DESIGN.md §13): keyset order (created_at, id) after `after`, visibility
   * and expiry in the query, so a page is full; `next` names the last row when more remain.
   */
  async page(
    caller: Caller,
    query: { id_prefix?: string; limit?: number; after?: ListPosition } = {},
  ): Promise<{ items: SandboxRecord[]; next: ListPosition | null }> {
    const filter: NonNullable<Parameters<SandboxStore['listSandboxes']>[0]> = {
      states: ['running', 'paused', 'unhealthy', 'error'],
      expires_after: this.deps.clock.now().toISOString(),
    };
    if (this.deps.settings.enforce_ownership && !caller.admin) filter.visible_to = { owner_id: caller.owner_id };
    if (query.id_prefix !== undefined && query.id_prefix !== '') filter.id_prefix = query.id_prefix;
    if (query.after !== undefined) filter.after = query.after;
    // One more than asked tells whether another page follows.
    if (query.limit !== undefined) filter.limit = query.limit + 1;
    const rows = (await this.deps.store.listSandboxes(filter)).filter((r) => this.visible(r, caller) && !this.pastTtl(r));
    if (query.limit === undefined || rows.length <= query.limit) return { items: rows, next: null };
    const items = rows.slice(0, query.limit);
    const last = items[items.length - 1]!;
    return { items, next: { created_at: last.created_at, id: last.id } };
  }

  async extend(id: string, ttl: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const ttlMs = parseDuration(ttl, 'ttl');
    if (ttlMs <= 0) throw badRequest('ttl must be positive');
    const limits = await this.deps.admission.limitsFor(rec.owner_id);
    if (limits.max_ttl_ms > 0 && ttlMs > limits.max_ttl_ms) {
      const data = { reason: 'max_ttl', operation: 'extend', requested: ttl, max: formatDuration(limits.max_ttl_ms) };
      this.deps.bus.publish({ type: 'resource.limit', sandbox_id: id, owner_id: rec.owner_id ?? undefined, data });
      throw new SbxError('resource_limit', `ttl exceeds the maximum of ${formatDuration(limits.max_ttl_ms)}`, { reason: 'max_ttl' });
    }
    // Racing a destroy: the sandbox is gone for the caller, never revived or answered as destroyed.
    if (this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    const now = this.deps.clock.now();
    const updated = await this.deps.store.updateSandbox(id, this.pauses.ttlPatch(rec, now, ttlMs));
    if (!updated || GONE.has(updated.state) || this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    // A remote sandbox's lease follows its expiry (TTL + 5 min), then the worker hears of it.
    if (!this.deps.locator.isLocal(updated)) await this.deps.locator.renew(updated, await this.deps.locator.workerOf(updated));
    return updated;
  }

  /**
   * `PUT …/egress` (DESIGN.md §10): replaces both lists of a filtered sandbox (409 `conflict` for
   * any other network; a bad rule → 400 naming it, nothing changed). The gateway reads the store
   * per connection, so new connections see the lists at once; the provider closes the open ones
   * the new lists no longer allow.
   */
  async updateEgress(id: string, body: unknown, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.get(id, caller);
    const lists = parseEgress(body ?? {});
    if (rec.network !== 'filtered')
      throw conflict(
        `sandbox ${id} has network ${JSON.stringify(rec.network ?? 'default')}: egress rules apply only to network "filtered"`,
      );
    if (this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    const updated = await this.deps.store.updateSandbox(id, { egress: lists, updated_at: this.deps.clock.now().toISOString() });
    if (!updated || GONE.has(updated.state)) throw notFound(`sandbox ${id} not found`);
    if (this.deps.locator.isLocal(updated)) {
      if (this.deps.providers.has(updated.provider)) this.deps.providers.get(updated.provider).egress?.changed(id);
    } else if (updated.runtime_id) {
      // A remote sandbox's gateway is its worker's: the lists go there (the store has them already,
      // so a worker that misses this call gets them again with the next PUT; an error says so).
      const remote = await this.deps.locator.provider(updated);
      await remote.remoteEgress?.update(updated.runtime_id, lists, AbortSignal.timeout(30_000));
    }
    return updated;
  }

  /**
   * Idempotent: an already destroyed or expired sandbox answers success; unknown → not_found. A
   * live sandbox whose provider is not configured here answers `unavailable` and stays recorded:
   * its runtime may still run, and forgetting it would leak it.
   */
  async destroy(id: string, caller: Caller, reason = 'requested'): Promise<void> {
    const rec = await this.deps.store.getSandbox(id);
    if (!rec || !this.visible(rec, caller)) throw notFound(`sandbox ${id} not found`);
    if (this.stranded(rec)) throw providerNotConfigured(rec);
    await this.teardown(rec, reason);
  }

  /** Destroys every sandbox whose TTL passed; returns how many. Stranded sandboxes are left alone. */
  async prune(caller: Caller): Promise<number> {
    const now = this.deps.clock.now().getTime();
    let pruned = 0;
    // Past their TTL, by the expires_at index, page by page (DESIGN.md §13).
    for await (const rec of sandboxPages(this.deps.store, {
      states: ['running', 'paused', 'unhealthy', 'error', 'expired'],
      expires_by: new Date(now).toISOString(),
    })) {
      if (!this.visible(rec, caller)) continue;
      if (rec.state !== 'expired' && Date.parse(rec.expires_at) > now) continue;
      if (this.stranded(rec)) {
        this.warnStranded(rec);
        continue;
      }
      await this.teardown(rec, 'expired');
      pruned++;
    }
    return pruned;
  }

  /**
   * The reaper's pass over this worker's sandboxes: tears down every sandbox past its TTL, and
   * every sandbox whose runtime the provider reports stopped or missing (reason `runtime_lost`).
   * A `running` sandbox found so (killed from outside, no operation since) first moves to `error`
   * with `sandbox.error`, so the stream tells why. Running sandboxes are checked against one
   * runtime listing per provider, then each suspect is confirmed by its own status. A provider
   * that cannot answer destroys nothing; the next pass tries again. Returns how many were torn down.
   */
  reap(opts?: ReapOptions): Promise<number> {
    return this.reaper.reap(opts);
  }

  /** A live sandbox with a runtime on a provider this server does not run: nothing here can reach it. */
  /** @internal the reaper's too. */
  stranded(rec: SandboxRecord): boolean {
    return this.deps.locator.isLocal(rec) && !GONE.has(rec.state) && rec.runtime_id !== null && !this.deps.providers.has(rec.provider);
  }

  /** @internal the reaper's too. */
  warnStranded(rec: SandboxRecord): void {
    if (this.warnedStranded.has(rec.id)) return;
    this.warnedStranded.add(rec.id);
    this.deps.warn?.(
      { sandbox_id: rec.id, provider: rec.provider },
      `sandbox left alone: provider "${rec.provider}" is not configured on this server; configure it again to reach or destroy its runtime`,
    );
  }

  /** Tears the runtime down (retried; see Teardowns), then marks the record destroyed and publishes. */
  /** @internal the reaper's too. */
  teardown(rec: SandboxRecord, reason: string, retry = true): Promise<void> {
    return this.teardowns.run(rec, reason, { retry });
  }

  /**
   * A running sandbox with its provider, for exec/files/logs/processes. A paused one is resumed
   * first (DESIGN.md §16), unless `resume` is false (internal followers: then `unavailable`); the
   * call counts as activity for auto-pause.
   */
  async resolveRuntime(
    id: string,
    caller: Caller,
    opts: { resume?: boolean } = {},
  ): Promise<{ rec: SandboxRecord; provider: Provider; runtimeId: string }> {
    let rec = await this.get(id, caller);
    if (this.destroying(id)) throw notFound(`sandbox ${id} not found`);
    if (this.stranded(rec)) throw providerNotConfigured(rec);
    if (opts.resume !== false) {
      rec = await this.pauses.ensureRunning(rec);
      this.pauses.activity.touch(id);
    }
    if (rec.state !== 'running' || !rec.runtime_id) {
      throw new SbxError('unavailable', `sandbox ${id} is ${rec.state}, not running`);
    }
    // Guarded: a failure publishes provider.failed, and a vanished runtime moves the sandbox to
    // `error`; a failure while the sandbox is being destroyed (or after) answers not_found.
    const guard = { ...this.deps, destroying: (sid: string) => this.destroying(sid) };
    return { rec, provider: guardRuntime(guard, rec, await this.deps.locator.provider(rec)), runtimeId: rec.runtime_id };
  }

  /** Ownership (DESIGN.md §3 "Auth"): with enforcement on, an owned sandbox is private to its owner and admins. */
  visible(rec: SandboxRecord, caller: Caller): boolean {
    return !this.deps.settings.enforce_ownership || ownerVisible(rec.owner_id, caller);
  }

  pastTtl(rec: SandboxRecord): boolean {
    return Date.parse(rec.expires_at) <= this.deps.clock.now().getTime();
  }
}

function providerNotConfigured(rec: SandboxRecord): SbxError {
  return unavailable(`sandbox ${rec.id} runs on provider "${rec.provider}", which is not configured on this server`);
}

/** Keeps typed SbxErrors; anything else becomes a generic provider_error (no backend text leaks). */
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

export function asProviderError(err: unknown, message: string): SbxError {
  if (isSbxError(err)) return err;
  return new SbxError('provider_error', message);
}
