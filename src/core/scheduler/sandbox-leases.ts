/**
 * Leases of remote sandboxes (spec 3.3, 4.11; DESIGN.md §7): taken for the owning worker at spawn
 * (TTL + 5 min), renewed before long calls and when the expiry moves, released at teardown; and
 * the lease a replica takes for a sandbox another replica forwards calls to. The locator's part.
 */
import { notFound, SbxError } from '../errors.js';
import type { Clock, LeaseRecord, LeaseStore, SandboxRecord, SandboxStore, WorkerRecord } from '../ports/index.js';
import type { RemoteWorkers } from './remote-port.js';

/** The worker id of a lone node (DESIGN §7); a replica's local worker has its replica id. */
export const LOCAL_WORKER_ID = 'local';
/** A lease outlives its sandbox's expiry by this much (DESIGN.md §3 "Timers"). */
export const LEASE_GRACE_MS = 5 * 60_000;
/** A remote call renews the lease first when it would expire within this long of the call's start. */
export const RENEW_HORIZON_MS = 60_000;

export interface SandboxLeaseDeps {
  store: SandboxStore & LeaseStore;
  remote?: RemoteWorkers;
  clock: Clock;
  /** This node's worker id (`local`). */
  workerId: string;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

export class SandboxLeases {
  constructor(private readonly deps: SandboxLeaseDeps) {}

  /**
   * A sandbox another replica spawned through its own API has no lease (a local spawn takes none),
   * and one whose TTL was extended there may have outlived its lease: forwarded calls carry one
   * like any remote call (DESIGN §7 fencing), so a live one is taken for the owning replica.
   */
  async replicaLease(sandboxId: string, workerId: string): Promise<LeaseRecord | null> {
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
