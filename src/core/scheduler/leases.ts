import type { Clock, LeaseRecord, LeaseResult, Store } from '../ports/index.js';

/**
 * Worker leases (spec Part 5): a worker renews only a lease it holds and that has not expired; the
 * store applies those rules atomically and reports `not_found`, `expired` or `held_by_other`.
 */
export class LeaseService {
  constructor(
    private readonly store: Pick<Store, 'renewLease' | 'listLeases'>,
    private readonly clock: Clock,
  ) {}

  /** Extends `resourceId`'s lease held by `workerId` to now + ttlMs. */
  renew(resourceId: string, workerId: string, ttlMs: number): Promise<LeaseResult> {
    return this.store.renewLease(resourceId, workerId, ttlMs, this.clock.now());
  }

  /** Every lease row, expired ones included (metrics and diagnostics). */
  list(): Promise<LeaseRecord[]> {
    return this.store.listLeases();
  }
}
