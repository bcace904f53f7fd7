/** Lease rows and the lease rules both stores apply (spec 3.3). */
import { badRequest } from '../../../../core/errors.js';
import type { LeaseRecord, LeaseResult } from '../../../../core/ports/index.js';
import { type Row, str, num } from './values.js';

export const LEASE_COLUMNS = ['resource_id', 'holder_id', 'generation', 'expires_at'] as const;

export function leaseFromRow(r: Row): LeaseRecord {
  return {
    resource_id: str(r.resource_id),
    holder_id: str(r.holder_id),
    generation: num(r.generation),
    expires_at: str(r.expires_at),
  };
}

function checkNow(now: Date): number {
  const t = now.getTime();
  if (!Number.isFinite(t)) throw badRequest('lease time is not a valid date');
  return t;
}

/** Validates a lease TTL and returns the expiry for a lease taken at `now`. */
export function leaseExpiry(now: Date, ttlMs: number): string {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw badRequest('lease ttl must be a positive number of milliseconds');
  return new Date(checkNow(now) + Math.floor(ttlMs)).toISOString();
}

/** A lease is expired from its `expires_at` instant on. */
export function leaseExpired(lease: LeaseRecord, now: Date): boolean {
  return Date.parse(lease.expires_at) <= checkNow(now);
}

/** Acquire succeeds with no lease, an expired lease, or the same holder. */
export function mayAcquire(current: LeaseRecord | null, holderId: string, now: Date): boolean {
  return current === null || current.holder_id === holderId || leaseExpired(current, now);
}

/** Renew succeeds only for the current holder before expiry; otherwise says why not. */
export function renewRefusal(
  current: LeaseRecord | null,
  holderId: string,
  now: Date,
): Extract<LeaseResult, { ok: false }>['reason'] | null {
  if (current === null) return 'not_found';
  if (current.holder_id !== holderId) return 'held_by_other';
  if (leaseExpired(current, now)) return 'expired';
  return null;
}
