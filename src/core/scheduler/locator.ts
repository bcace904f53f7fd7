/**
 * Where a sandbox's runtime lives: the one place core decides between this node's providers and a
 * remote worker (DESIGN.md §7). Spawn asks `place()`; every later operation asks `provider(rec)`,
 * which answers an ordinary Provider either way, so services never branch on `worker_id`.
 */
import { LatencyWindow } from './latency.js';
import { SbxError, unavailable } from '../errors.js';
import type { EgressLists } from '../network/rules.js';
import type { ProviderRegistry, ProviderStatus } from '../providers/registry.js';
import type { Clock, LeaseStore, Provider, RuntimeStatus, SandboxRecord, SandboxStore, WorkerRecord, WorkerStore } from '../ports/index.js';
import { place, PLACEMENT_STALE_AFTER_MS, REPLICA_CAPABILITY, type PlacementRequest } from './placement.js';
import type { RemoteTarget, RemoteWorkers } from './remote-port.js';
import { PlacementReservations, type PlacementRead, type PlacementSlot } from './reservations.js';
import { capableCandidates, localWorkerRow } from './candidates.js';
import { ProviderOffers } from './offers.js';
import { SandboxLeases } from './sandbox-leases.js';

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

  /** Leases of remote sandboxes: acquire, renew, release. */
  readonly leases: SandboxLeases;
  private readonly offers: ProviderOffers;

  constructor(readonly deps: LocatorDeps) {
    this.leases = new SandboxLeases(deps);
    this.offers = new ProviderOffers(
      deps,
      () => this.workers(),
      (w) => this.fresh(w),
    );
  }

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
  spawnProvider(named: string | undefined): Promise<string> {
    return this.offers.spawnProvider(named);
  }

  /** True when this node or a registered worker runs the provider. */
  knownProvider(name: string): Promise<boolean> {
    return this.offers.knownProvider(name);
  }

  /** Provider list items of this node's providers and of those fresh online workers advertise (ProviderOffers). */
  providerStatuses(fresh = false): Promise<ProviderStatus[]> {
    return this.offers.providerStatuses(fresh);
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
    if (this.deps.localWorker && !this.localRemoved) candidates.push(localWorkerRow(this.deps.workerId, this.deps.providers.names(), now));
    if (req.worker_id !== undefined) {
      const pinned = req.worker_id;
      candidates = candidates.filter((w) => w.id === pinned);
      if (candidates.length === 0)
        throw unavailable(`worker ${pinned}, which keeps the snapshot, volumes or fork image this sandbox needs, is not available`);
    }
    if (req.capability !== undefined) candidates = capableCandidates(candidates, req, this.deps.providers, this.deps.workerId);
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
        worker.capabilities.includes(REPLICA_CAPABILITY) ? this.leases.replicaLease(rec.id, worker.id) : this.deps.store.getLease(rec.id),
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
    await this.leases.renewBefore(rec, worker, callMs);
    return this.remoteProvider(worker, rec);
  }

  /** Kept on this node by a provider this server does not run (a sandbox's runtime, a snapshot): nothing here reaches it. */
  providerMissing(item: Pick<SandboxRecord, 'worker_id' | 'provider'>): boolean {
    return this.isLocal(item) && !this.deps.providers.has(item.provider);
  }

  /**
   * The provider holding a snapshot, volume or fork image kept on `worker_id`: this node's (503
   * naming `what` when it is not configured here) or the worker's over the RPC; null when that
   * worker is no longer registered. `id` names the remote target (a sandbox id or `volume-NAME`).
   */
  async holder(item: { worker_id: string; provider: string; id: string }, what: string): Promise<Provider | null> {
    if (this.isLocal(item)) {
      if (!this.deps.providers.has(item.provider))
        throw unavailable(`provider "${item.provider}" that holds ${what} is not configured on this server`);
      return this.deps.providers.get(item.provider);
    }
    const w = await this.workerOf(item);
    return w ? this.remoteProvider(w, { id: item.id, provider: item.provider, runtime_id: null }) : null;
  }

  /**
   * Where a new volume of `provider` is made: this node when it runs the provider, else a worker
   * placement picks (no sandbox slot is taken there); 503 when none can hold it.
   */
  async volumeHome(provider: string, ownerId: string | null, name: string): Promise<{ provider: Provider; worker_id: string }> {
    if (this.deps.providers.has(provider)) return { provider: this.deps.providers.get(provider), worker_id: this.deps.workerId };
    const target = await this.place({ provider, owner_id: ownerId }, { reserve: false });
    if (target.local) throw unavailable(`provider "${provider}" runs nowhere that can hold volumes`);
    const remote = this.remoteProvider(target.worker, { id: `volume-${name}`, provider, runtime_id: null });
    return { provider: remote, worker_id: target.worker.id };
  }

  /**
   * A remote sandbox's runtime status as its worker reports it within `timeoutMs`; null for a
   * sandbox of this node or without a runtime, one whose worker left the registry, or no answer.
   */
  async remoteStatus(rec: SandboxRecord, timeoutMs: number): Promise<RuntimeStatus | null> {
    if (this.isLocal(rec) || !rec.runtime_id) return null;
    const worker = await this.workerOf(rec);
    if (!worker) return null;
    try {
      return await this.remoteProvider(worker, rec).status(rec.runtime_id, AbortSignal.timeout(timeoutMs));
    } catch {
      return null;
    }
  }

  /**
   * After a sandbox's expiry moved (extend, the resume of an `on_expire: pause` sandbox): a remote
   * sandbox's lease follows it (TTL + 5 min) and its worker hears of it; this node's need nothing.
   */
  async expiryMoved(rec: SandboxRecord): Promise<void> {
    if (!this.isLocal(rec)) await this.leases.renew(rec, await this.workerOf(rec));
  }

  /**
   * New egress lists of a filtered sandbox (DESIGN.md §10): this node's provider closes the open
   * connections they no longer allow; a remote sandbox's lists go to its worker's gateway (the
   * store has them already, so a worker that misses this call gets them with the next PUT).
   */
  async egressChanged(rec: SandboxRecord, lists: EgressLists): Promise<void> {
    if (this.isLocal(rec)) {
      if (this.deps.providers.has(rec.provider)) this.deps.providers.get(rec.provider).egress?.changed(rec.id);
    } else if (rec.runtime_id) {
      const remote = await this.provider(rec);
      await remote.remoteEgress?.update(rec.runtime_id, lists, AbortSignal.timeout(30_000));
    }
  }

  /**
   * The preview domain each sandbox shows (spec 2.1): its worker's advertised domain for a remote
   * sandbox, else `local` (`server.preview_domain`). At most one worker listing per call.
   */
  async previewDomains(recs: readonly SandboxRecord[], local: string): Promise<(rec: SandboxRecord) => string> {
    if (recs.every((r) => this.isLocal(r))) return () => local;
    const byWorker = new Map<string, string>();
    if (recs.length === 1) {
      const w = await this.deps.store.getWorker(recs[0]!.worker_id);
      if (w?.capacity.preview_domain) byWorker.set(w.id, w.capacity.preview_domain);
    } else {
      for (const w of await this.deps.store.listWorkers()) if (w.capacity.preview_domain) byWorker.set(w.id, w.capacity.preview_domain);
    }
    return (rec) => (this.isLocal(rec) ? local : (byWorker.get(rec.worker_id) ?? local));
  }
}

/** Stored counts plus pending slots, per worker. */
function addCounts(stored: Record<string, number>, pending: ReadonlyMap<string, number>): Map<string, number> {
  const out = new Map(Object.entries(stored));
  for (const [w, n] of pending) out.set(w, (out.get(w) ?? 0) + n);
  return out;
}
