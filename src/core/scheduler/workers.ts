import { badRequest, notFound, SbxError, unavailable } from '../errors.js';
import { canonicalProviderName } from '../providers/registry.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, EgressCounts, SandboxStore, WorkerCapacity, WorkerRecord, WorkerStore } from '../ports/index.js';
import type { RuntimeLocator } from './locator.js';
import type { RemoteWorkers } from './remote-port.js';
import { REPLICA_CAPABILITY } from './placement.js';
import { publishWorkerEvents, type WorkerDenial } from './worker-events.js';

export const STALE_AFTER_MS = 2 * 60_000;
export interface HeartbeatInput {
  hostname: string;
  status?: string;
  providers?: string[];
  capabilities?: string[];
  capacity?: Partial<WorkerCapacity>;
  /** Its egress gateway's cumulative verdicts (DESIGN §10). */
  egress?: EgressCounts;
}

/** The worker registry (spec 2.9, 4.6). In single-node mode this process is the worker `local`. */
export class WorkerService {
  constructor(
    private readonly store: WorkerStore,
    private readonly clock: Clock,
    private readonly opts: {
      locator?: RuntimeLocator;
      remote?: RemoteWorkers;
      /** The verdicts a worker's gateway made since its previous heartbeat (for sbx_egress_connections_total). */
      onEgress?(delta: EgressCounts): void;
      /** Where a worker's reported events go (`POST /api/v1/worker/events`). */
      events?: { store: Pick<SandboxStore, 'getSandbox'>; bus: EventBus };
    } = {},
  ) {}

  async heartbeat(id: string, input: HeartbeatInput): Promise<WorkerRecord> {
    const now = this.clock.now().toISOString();
    const prev = await this.store.getWorker(id);
    const capacity: WorkerCapacity = {
      max_sandboxes: input.capacity?.max_sandboxes ?? prev?.capacity.max_sandboxes ?? 0,
      max_sandboxes_per_owner: input.capacity?.max_sandboxes_per_owner ?? prev?.capacity.max_sandboxes_per_owner ?? 0,
    };
    const rpcUrl = input.capacity?.rpc_url ?? prev?.capacity.rpc_url;
    if (input.capacity?.rpc_url !== undefined && input.capacity.rpc_url !== '' && !httpUrl(input.capacity.rpc_url)) {
      throw badRequest('capacity.rpc_url must be an http:// or https:// URL');
    }
    const preview = input.capacity?.preview_domain ?? prev?.capacity.preview_domain;
    if (rpcUrl) capacity.rpc_url = rpcUrl;
    if (preview) capacity.preview_domain = preview;
    const egress = input.egress ?? prev?.egress;
    const saved = await this.store.upsertWorker({
      id,
      hostname: input.hostname,
      status: input.status ?? prev?.status ?? 'online',
      // Older workers send `custom-http`: kept under the canonical name (DESIGN §12).
      providers: input.providers ? [...new Set(input.providers.map(canonicalProviderName))] : (prev?.providers ?? []),
      capabilities: input.capabilities ?? prev?.capabilities ?? [],
      capacity,
      ...(egress ? { egress } : {}),
      last_heartbeat: now,
      updated_at: now,
    });
    // The counts since the one stored (whichever replica took it); counts that went down started over.
    if (input.egress && this.opts.onEgress) {
      const before = prev?.egress ?? { allowed: 0, denied: 0 };
      const since = (now: number, then: number) => (now >= then ? now - then : now);
      const delta = {
        allowed: since(input.egress.allowed, before.allowed),
        denied: since(input.egress.denied, before.denied),
        injections: since(input.egress.injections ?? 0, before.injections ?? 0),
      };
      if (delta.allowed > 0 || delta.denied > 0 || delta.injections > 0) this.opts.onEgress(delta);
    }
    // Placement reads the registry at most once a second; a worker that joined or changed shows at once.
    if (!prev || placementView(prev) !== placementView(saved)) this.opts.locator?.forgetWorkers();
    return saved;
  }

  /**
   * Refuses an `sbx worker` that speaks for a replica's local worker (its id's row is a replica's)
   * or announces itself as one: its credentials can never drive or impersonate a replica (DESIGN §7).
   */
  async refuseReplicaId(id: string, input?: Pick<HeartbeatInput, 'capabilities'>): Promise<void> {
    if (input?.capabilities?.includes(REPLICA_CAPABILITY))
      throw new SbxError('forbidden', `the ${REPLICA_CAPABILITY} capability is reserved for control-plane replicas`);
    const row = await this.store.getWorker(id);
    if (row?.capabilities.includes(REPLICA_CAPABILITY))
      throw new SbxError('forbidden', `worker id ${id} is a control-plane replica's; an sbx worker cannot act for it`);
  }

  /** A worker's batch of events about its own sandboxes (DESIGN §10); others' are dropped and counted. */
  reportEvents(workerId: string, events: readonly WorkerDenial[]): Promise<{ accepted: number; rejected: number }> {
    if (!this.opts.events) throw new SbxError('not_implemented', 'this control plane takes no worker events');
    return publishWorkerEvents(this.opts.events, workerId, events);
  }

  list(): Promise<WorkerRecord[]> {
    return this.store.listWorkers();
  }

  async get(id: string): Promise<WorkerRecord> {
    const w = await this.store.getWorker(id);
    if (!w) throw notFound(`worker ${id} not found`);
    return w;
  }

  /**
   * Removes a worker from the registry. Deleting this node's own worker (`local`) takes it out of
   * placement until it restarts (its heartbeats stop re-adding it); its sandboxes keep running.
   */
  async remove(id: string): Promise<void> {
    if (!(await this.store.deleteWorker(id))) throw notFound(`worker ${id} not found`);
    this.opts.locator?.forgetWorkers();
    if (this.opts.locator && id === this.opts.locator.localId) this.opts.locator.localRemoved = true;
  }

  /**
   * Drains a remote worker (`worker.shutdown {mode: "drain"}`): it refuses new spawns and reports
   * `draining`, which placement honours at once (the registry row says so before its next
   * heartbeat); its running sandboxes keep answering. A worker that does not answer → 503 and
   * nothing changes; one this server cannot call at all (no rpc_url or credential) → 409.
   */
  async drain(id: string): Promise<WorkerRecord> {
    const w = await this.get(id);
    if (this.opts.locator && id === this.opts.locator.localId)
      throw badRequest(`the local worker cannot be drained; stop sbx serve instead`);
    const remote = this.opts.remote;
    if (!remote) throw unavailable('this server has no worker RPC client');
    // A worker this server cannot call at all (no rpc_url, no credential) is a state, not an outage.
    const why = remote.unreachableReason(w);
    if (why !== null) throw new SbxError('conflict', `${why}: it cannot be drained from here; stop its sbx worker with SIGTERM`);
    await remote.drain(w, AbortSignal.timeout(10_000));
    const drained = await this.store.upsertWorker({ ...w, status: 'draining', updated_at: this.clock.now().toISOString() });
    this.opts.locator?.forgetWorkers();
    return drained;
  }

  isStale(w: WorkerRecord): boolean {
    return this.clock.now().getTime() - Date.parse(w.last_heartbeat) > STALE_AFTER_MS;
  }
}

/** What placement reads of a worker, besides the time of its heartbeat. */
function placementView(w: WorkerRecord): string {
  return JSON.stringify([w.status, w.providers, w.capabilities, w.capacity]);
}

/** True for an absolute http(s) URL with a host. */
function httpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    return false;
  }
}
