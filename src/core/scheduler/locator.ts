/**
 * Where a sandbox's runtime lives: the one place core decides between this node's providers and a
 * remote worker (DESIGN.md §7). Spawn asks `place()`; every later operation asks `provider(rec)`,
 * which answers an ordinary Provider either way, so services never branch on `worker_id`.
 */
import { LatencyWindow } from './latency.js';
import { badRequest, notFound, SbxError, unavailable } from '../errors.js';
import type { ProviderRegistry, ProviderStatus } from '../providers/registry.js';
import type {
  Clock,
  LeaseRecord,
  LeaseStore,
  Provider,
  RuntimeStatus,
  SandboxRecord,
  SandboxStore,
  WorkerRecord,
  WorkerStore,
} from '../ports/index.js';
import {
  place,
  PLACEMENT_STALE_AFTER_MS,
  providerCapabilities,
  REPLICA_CAPABILITY,
  remoteDefaultProvider,
  type PlacementRequest,
} from './placement.js';
import type { RemoteTarget, RemoteWorkers } from './remote-port.js';
import { PlacementReservations, type PlacementRead, type PlacementSlot } from './reservations.js';

/** The worker id of a lone node (DESIGN §7); a replica's local worker has its replica id. */
export const LOCAL_WORKER_ID = 'local';
/** A lease outlives its sandbox's expiry by this much (DESIGN.md §3 "Timers"). */
export const LEASE_GRACE_MS = 5 * 60_000;
/** A remote call renews the lease first when it would expire within this long of the call's start. */
const RENEW_HORIZON_MS = 60_000;
/** How long placement reuses one read of the worker registry. */
const WORKERS_TTL_MS = 1_000;

export interface LocatorDeps {
  store: SandboxStore & WorkerStore & LeaseStore;
  providers: ProviderRegistry;
  remote?: RemoteWorkers;
  clock: Clock;
  /** This node's worker id (`local`). */
  workerId: string;
  /** `server.local_worker`. */
  localWorker: boolean;
  /**
   * Whether a registered worker can take spawns beyond its heartbeat (DESIGN §7: a peer replica's
   * local worker only while its replica lease is live). Default: every worker can.
   */
  peerLive?: (w: WorkerRecord) => Promise<boolean>;
  /** How long one read of the worker registry serves placement (default 1 s; 0 = every time). */
  workersTtlMs?: number;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

/** Where a spawn goes; a remote one holds a slot on its worker until the spawn is stored or failed. */
export type Target = { local: true; worker_id: string } | { local: false; worker: WorkerRecord; slot?: PlacementSlot };

export class RuntimeLocator {
  /** The last placement (diagnostics `scheduler.selected_worker_id` / `eligible_workers`). */
  last: { selected_worker_id: string; eligible_workers: number } = { selected_worker_id: '', eligible_workers: 0 };
  /** How long placement decisions took (diagnostics `scheduler.placement_p50_ms` / `_p99_ms`). */
  readonly placementTimes = new LatencyWindow();
  /** Set when an admin deleted this node's worker row: it takes no spawns until it restarts. */
  localRemoved = false;
  /**
   * Workers whose RPC did not answer, with when: placement skips one until it heartbeats again
   * after that moment (a killed worker still looks fresh for two minutes by its last heartbeat).
   */
  private readonly silentSince = new Map<string, number>();

  private workersRead: { at: number; list: Promise<WorkerRecord[]> } | null = null;
  /** Spawns placed on remote workers and not yet stored (counted by placement). */
  readonly reservations = new PlacementReservations();

  constructor(readonly deps: LocatorDeps) {}

  /** The last placement and how long placements take (diagnostics `scheduler`). */
  figures(): {
    selected_worker_id: string;
    eligible_workers: number;
    placements: number;
    placement_p50_ms: number;
    placement_p99_ms: number;
  } {
    const t = this.placementTimes;
    return { ...this.last, placements: t.count, placement_p50_ms: t.quantile(50), placement_p99_ms: t.quantile(99) };
  }

  /**
   * The registered workers, read at most once per WORKERS_TTL_MS (DESIGN.md §13): a spawn reads
   * them up to three times, and a fleet's thousand rows are not worth reading per spawn when
   * freshness is judged in minutes. Changes made through this process show at once (`forgetWorkers`).
   */
  private workers(): Promise<WorkerRecord[]> {
    const now = performance.now();
    if (!this.workersRead || now - this.workersRead.at > (this.deps.workersTtlMs ?? WORKERS_TTL_MS)) {
      const list = this.deps.store.listWorkers();
      const read = { at: now, list };
      this.workersRead = read;
      list.catch(() => {
        if (this.workersRead === read) this.workersRead = null;
      });
    }
    return this.workersRead.list;
  }

  /** The next read of the workers goes to the store (a worker joined, changed, drained or left). */
  forgetWorkers(): void {
    this.workersRead = null;
  }

  get localId(): string {
    return this.deps.workerId;
  }

  /** True when this node runs the sandbox's runtime itself. */
  isLocal(rec: Pick<SandboxRecord, 'worker_id'>): boolean {
    return rec.worker_id === this.deps.workerId;
  }

  /** The provider a spawn uses: the one named, else the default (here, or what workers offer). */
  async spawnProvider(named: string | undefined): Promise<string> {
    const { providers } = this.deps;
    if (named !== undefined) {
      if (!(await this.knownProvider(named))) {
        const offered = await this.offeredProviders();
        throw badRequest(`unknown provider "${named}" (available: ${offered.join(', ') || 'none'})`);
      }
      return named;
    }
    if (this.deps.localWorker && providers.has(providers.defaultProviderName)) return providers.defaultProviderName;
    const workers = await this.workers();
    const remote = remoteDefaultProvider(providers.defaultProviderName, workers, this.deps.clock.now(), this.deps.workerId);
    if (remote !== null && (await this.knownProvider(remote))) return remote;
    if (!this.deps.localWorker)
      throw unavailable('no online worker offers a provider: start one with `sbx worker --control-plane URL --listen ADDR`');
    // Nothing anywhere: the registry says why and how to get one (503).
    return providers.defaultProvider;
  }

  /** True when this node or a registered worker runs the provider. */
  async knownProvider(name: string): Promise<boolean> {
    if (this.deps.localWorker && this.deps.providers.has(name)) return true;
    return (await this.workers()).some((w) => w.id !== this.deps.workerId && w.providers.includes(name));
  }

  /** Provider names this node or any registered worker runs, sorted. */
  async offeredProviders(): Promise<string[]> {
    const names = new Set(this.deps.localWorker ? this.deps.providers.names() : []);
    for (const w of await this.workers()) if (w.id !== this.deps.workerId) for (const p of w.providers) names.add(p);
    return [...names].sort();
  }

  /**
   * Provider list items for this node's providers and, beside them, for every provider that an
   * online, fresh remote worker advertises (DESIGN.md §7: healthy when one healthy worker has it —
   * workers advertise only their healthy providers). A remote item's `last_checked` is the newest
   * heartbeat that advertised it; its latency is not measured from here (0).
   */
  async providerStatuses(fresh = false): Promise<ProviderStatus[]> {
    const local = this.deps.localWorker ? await this.deps.providers.statuses(fresh) : [];
    const seen = new Set(local.map((p) => p.name));
    const remote = new Map<string, { at: string; capabilities: Set<string> }>();
    for (const w of await this.workers()) {
      if (w.id === this.deps.workerId || w.status !== 'online' || !this.fresh(w)) continue;
      for (const name of w.providers) {
        if (seen.has(name)) continue;
        const cur = remote.get(name) ?? { at: w.last_heartbeat, capabilities: new Set<string>() };
        if (w.last_heartbeat > cur.at) cur.at = w.last_heartbeat;
        for (const c of w.capabilities) cur.capabilities.add(c);
        // Per provider (`tty:docker`): what this provider really has on that worker.
        for (const c of providerCapabilities(w, name)) cur.capabilities.add(c);
        remote.set(name, cur);
      }
    }
    const items: ProviderStatus[] = [...remote].map(([name, r]) => ({
      name,
      healthy: true,
      default: name === this.deps.providers.defaultProviderName,
      latency_ms: 0,
      last_checked: r.at,
      capabilities: [...r.capabilities].sort(),
    }));
    return [...local, ...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /**
   * Chooses the worker for a spawn (DESIGN.md §7 "Placement"); 503 when none can take it. A remote
   * choice holds a slot there (`reserve`, the default) that the spawn hands over to its stored row.
   */
  async place(req: PlacementRequest, opts: { reserve?: boolean } = {}): Promise<Target> {
    const read = this.reservations.begin();
    try {
      return await this.placeWith(req, read, opts.reserve !== false);
    } finally {
      read.end();
    }
  }

  private async placeWith(req: PlacementRequest, read: PlacementRead, reserve: boolean): Promise<Target> {
    const { store, clock } = this.deps;
    const started = performance.now();
    const now = clock.now();
    const workers = await this.workers();
    let remote = workers.filter((w) => w.id !== this.deps.workerId && this.answering(w));
    const peerLive = this.deps.peerLive;
    if (peerLive) {
      const live = await Promise.all(remote.map((w) => peerLive(w)));
      remote = remote.filter((_w, i) => live[i]);
    }
    // Counts by index (DESIGN.md §13), never a listing; and none at all when this node is the only
    // candidate: its limits are the global ones admission has just applied.
    const counts =
      remote.length > 0 ? await store.countLiveByWorker(now.toISOString(), req.owner_id) : { by_worker: {}, by_worker_for_owner: {} };
    // Plus the spawns placed and not yet stored; from here to the slot's hold nothing awaits.
    const pending = read.pending(req.owner_id);
    const active = addCounts(counts.by_worker, pending.by_worker);
    const mine = addCounts(counts.by_worker_for_owner, pending.by_worker_for_owner);
    // This node takes part by configuration, not by its registry row (heartbeats may lag a start).
    let candidates = remote;
    if (this.deps.localWorker && !this.localRemoved) candidates.push(this.localRow(now));
    if (req.worker_id !== undefined) {
      const pinned = req.worker_id;
      candidates = candidates.filter((w) => w.id === pinned);
      if (candidates.length === 0)
        throw unavailable(`worker ${pinned}, which keeps the snapshot, volumes or fork image this sandbox needs, is not available`);
    }
    if (req.capability !== undefined) candidates = this.capable(candidates, req);
    const choice = place(req, {
      workers: candidates,
      local_id: this.deps.workerId,
      local_enabled: this.deps.localWorker && !this.localRemoved,
      local_providers: this.deps.providers.names(),
      active,
      active_for_owner: mine,
      now,
    });
    this.last = { selected_worker_id: choice.ok ? choice.worker_id : '', eligible_workers: choice.eligible };
    this.placementTimes.record(performance.now() - started);
    if (!choice.ok) throw unavailable(choice.reason);
    if (choice.local) return { local: true, worker_id: choice.worker_id };
    const worker = candidates.find((w) => w.id === choice.worker_id)!;
    const why = this.deps.remote ? this.deps.remote.unreachableReason(worker) : 'this server has no worker RPC client';
    if (why !== null) throw new SbxError('remote_worker_rpc_unavailable', why);
    return reserve ? { local: false, worker, slot: this.reservations.hold(worker.id, req.owner_id) } : { local: false, worker };
  }

  /**
   * The candidates that can take a spawn needing `req.capability` (a filtered spawn: DESIGN §10):
   * this node when its provider enforces egress now, a worker when it advertises the capability.
   * None → 501 with why this node cannot (or that no worker can), before any runtime exists.
   */
  private capable(candidates: WorkerRecord[], req: PlacementRequest): WorkerRecord[] {
    const cap = req.capability!;
    let localWhy: string | null = null;
    const out = candidates.filter((w) => {
      if (w.id !== this.deps.workerId) return w.capabilities.includes(cap);
      if (!this.deps.providers.has(req.provider)) return false;
      const egress = this.deps.providers.get(req.provider).egress;
      const why = egress ? egress.unavailable() : null;
      if (!egress) localWhy = `network "filtered" needs a provider that enforces egress rules (docker); provider ${req.provider} cannot`;
      else if (why !== null) localWhy = `network "filtered" is not available here: ${why}`;
      return localWhy === null;
    });
    if (out.length > 0) return out;
    throw new SbxError(
      'not_implemented',
      localWhy ?? `network "filtered" is not available: no worker running provider ${req.provider} enforces egress rules`,
    );
  }

  private localRow(now: Date): WorkerRecord {
    const at = now.toISOString();
    const names = this.deps.providers.names();
    return {
      id: this.deps.workerId,
      hostname: '',
      status: 'online',
      providers: names,
      capabilities: [],
      capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0 },
      last_heartbeat: at,
      created_at: at,
      updated_at: at,
    };
  }

  /** Records that a worker's RPC did not answer: no spawns go to it until it heartbeats again. */
  markSilent(workerId: string): void {
    this.silentSince.set(workerId, this.deps.clock.now().getTime());
  }

  /** False while a worker that did not answer has not heartbeated since. */
  answering(w: WorkerRecord): boolean {
    const since = this.silentSince.get(w.id);
    if (since === undefined) return true;
    if (Date.parse(w.last_heartbeat) > since) {
      this.silentSince.delete(w.id);
      return true;
    }
    return false;
  }

  /** The registered worker that owns a remote sandbox, or null when it was deleted from the registry. */
  async workerOf(rec: Pick<SandboxRecord, 'worker_id'>): Promise<WorkerRecord | null> {
    return this.deps.store.getWorker(rec.worker_id);
  }

  /** True when the worker heartbeats, is fresh and not offline (it may be draining). */
  fresh(w: WorkerRecord): boolean {
    return (
      (w.status === 'online' || w.status === 'draining') &&
      this.deps.clock.now().getTime() - Date.parse(w.last_heartbeat) <= PLACEMENT_STALE_AFTER_MS
    );
  }

  /** A Provider bound to a remote sandbox on `worker`. */
  /**
   * The statuses of many runtimes `worker` runs, in as few calls as it allows; null when it (or
   * this server's RPC client) has no batched status: then ask each through `remoteProvider`.
   */
  async remoteStatuses(
    worker: WorkerRecord,
    recs: ReadonlyArray<Pick<SandboxRecord, 'id' | 'provider'> & { runtime_id: string }>,
    signal?: AbortSignal,
  ): Promise<Map<string, RuntimeStatus> | null> {
    const remote = this.deps.remote;
    // Replicas answer for their peers one sandbox at a time: a replica's batch would judge sandboxes
    // another replica is still creating as gone (over-admission in test/replicas), so they keep the
    // per-sandbox path until the batch learns the replica's in-flight spawns.
    if (!remote?.statusBatch || worker.capabilities.includes(REPLICA_CAPABILITY)) return null;
    return remote.statusBatch(
      worker,
      recs.map((r) => ({ sandbox_id: r.id, provider: r.provider, runtime_id: r.runtime_id })),
      signal,
    );
  }

  remoteProvider(worker: WorkerRecord, rec: Pick<SandboxRecord, 'id' | 'provider' | 'runtime_id'>, ttl?: string): Provider {
    const remote = this.deps.remote;
    if (!remote) throw new SbxError('remote_worker_rpc_unavailable', 'this server has no worker RPC client');
    const target: RemoteTarget = {
      sandbox_id: rec.id,
      provider: rec.provider,
      runtime_id: rec.runtime_id,
      lease: () =>
        worker.capabilities.includes(REPLICA_CAPABILITY) ? this.replicaLease(rec.id, worker.id) : this.deps.store.getLease(rec.id),
    };
    if (ttl !== undefined) target.ttl = ttl;
    return remote.provider(worker, target);
  }

  /**
   * The provider that reaches a sandbox's runtime. Local: this node's provider (not_found naming
   * the configured ones when it is not). Remote: the owning worker over the RPC, its lease renewed
   * first when it would expire within a long call; a worker gone from the registry is `unavailable`.
   */
  async provider(rec: SandboxRecord, callMs = 0): Promise<Provider> {
    if (this.isLocal(rec)) return this.deps.providers.get(rec.provider);
    const worker = await this.workerOf(rec);
    if (!worker) throw unavailable(`sandbox ${rec.id} is on worker ${rec.worker_id}, which is no longer registered`);
    await this.renewBefore(rec, worker, callMs);
    return this.remoteProvider(worker, rec);
  }

  /**
   * A sandbox another replica spawned through its own API has no lease (a local spawn takes none),
   * and one whose TTL was extended there may have outlived its lease: forwarded calls carry one
   * like any remote call (DESIGN §7 fencing), so a live one is taken for the owning replica.
   */
  private async replicaLease(sandboxId: string, workerId: string): Promise<LeaseRecord | null> {
    const now = this.deps.clock.now();
    const lease = await this.deps.store.getLease(sandboxId);
    if (lease && lease.holder_id === workerId && Date.parse(lease.expires_at) > now.getTime() + RENEW_HORIZON_MS) return lease;
    const rec = await this.deps.store.getSandbox(sandboxId);
    const ttlMs = Math.max(0, rec ? Date.parse(rec.expires_at) - now.getTime() : 0) + LEASE_GRACE_MS;
    return this.deps.store.acquireLease(sandboxId, workerId, ttlMs, now);
  }

  /** Gives back the lease of a sandbox this replica ran (taken when another replica forwarded a call to it). */
  async releaseLocal(rec: Pick<SandboxRecord, 'id' | 'worker_id'>): Promise<void> {
    if (this.deps.workerId !== LOCAL_WORKER_ID) await this.deps.store.releaseLease(rec.id, rec.worker_id).catch(() => false);
  }

  /**
   * Renews a remote sandbox's lease when a call of `callMs` starting now could outlive it (spec 4.11
   * rule 1: the control plane renews before long operations pass the expiry). Best effort.
   */
  async renewBefore(rec: SandboxRecord, worker: WorkerRecord, callMs: number): Promise<void> {
    const lease = await this.deps.store.getLease(rec.id);
    if (!lease || lease.holder_id !== rec.worker_id) return;
    const until = this.deps.clock.now().getTime() + callMs + RENEW_HORIZON_MS;
    if (Date.parse(lease.expires_at) > until) return;
    await this.renew(rec, worker, until).catch(() => undefined);
  }

  /** Acquires the lease of a new remote sandbox for its worker: TTL + 5 min. */
  async acquire(sandboxId: string, workerId: string, ttlMs: number): Promise<LeaseRecord> {
    const lease = await this.deps.store.acquireLease(sandboxId, workerId, ttlMs + LEASE_GRACE_MS, this.deps.clock.now());
    if (!lease) throw new SbxError('conflict', `sandbox ${sandboxId} is leased by another worker`);
    return lease;
  }

  /** Releases a remote sandbox's lease (its holder is the owning worker); false when there was none. */
  release(rec: Pick<SandboxRecord, 'id' | 'worker_id'>): Promise<boolean> {
    return this.deps.store.releaseLease(rec.id, rec.worker_id);
  }

  /**
   * Renews a remote sandbox's lease to its expiry + 5 min in the store, then tells the worker
   * (`worker.renew_lease`). A lease that expired or was taken answers `conflict`; a worker that
   * does not answer is logged, not fatal: the store is the authority and the next renewal tells it.
   */
  async renew(rec: SandboxRecord, worker: WorkerRecord | null, atLeastUntil = 0): Promise<LeaseRecord> {
    const now = this.deps.clock.now();
    const ttlMs = Math.max(0, Date.parse(rec.expires_at) - now.getTime(), atLeastUntil - now.getTime()) + LEASE_GRACE_MS;
    const result = await this.deps.store.renewLease(rec.id, rec.worker_id, ttlMs, now);
    if (!result.ok) {
      if (result.reason === 'not_found') throw notFound(`lease ${rec.id} not found`);
      throw new SbxError(
        'conflict',
        result.reason === 'expired' ? `lease ${rec.id} has expired` : `lease ${rec.id} is held by another worker`,
      );
    }
    if (worker && this.deps.remote) {
      try {
        await this.deps.remote.renewLease(worker, result.lease, AbortSignal.timeout(10_000));
      } catch (err) {
        this.deps.warn?.(
          { sandbox_id: rec.id, worker_id: worker.id, code: (err as SbxError).code },
          'worker did not confirm the lease renewal',
        );
      }
    }
    return result.lease;
  }
}

/** Stored counts plus pending slots, per worker. */
function addCounts(stored: Record<string, number>, pending: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map(Object.entries(stored));
  for (const [w, n] of pending) out.set(w, (out.get(w) ?? 0) + n);
  return out;
}
