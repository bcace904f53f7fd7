/** Leases (spec 3.3): who holds a resource, fenced by generation (a Store role). */

export interface LeaseRecord {
  resource_id: string;
  holder_id: string;
  generation: number;
  expires_at: string;
}

export type LeaseResult = { ok: true; lease: LeaseRecord } | { ok: false; reason: 'not_found' | 'held_by_other' | 'expired' };

export interface LeaseStore {
  /**
   * Atomic (spec 3.3): succeeds when no lease exists, the lease expired at `now`, or the same
   * holder renews; generation increments on every success. Null when another holder owns an
   * unexpired lease.
   */
  acquireLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseRecord | null>;
  /** Only the current holder, only before expiry; generation increments. */
  renewLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseResult>;
  /** Only the current holder. */
  releaseLease(resourceId: string, holderId: string): Promise<boolean>;
  getLease(resourceId: string): Promise<LeaseRecord | null>;
  /** Sorted by resource_id. */
  listLeases(): Promise<LeaseRecord[]>;
}
