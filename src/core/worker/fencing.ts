/**
 * Lease fencing on a worker (DESIGN.md §7 "Fencing"): the one place a worker judges the lease a
 * call carries. The control plane sends the sandbox's lease on every sandbox-scoped call that
 * changes something; the worker refuses a lease that names another holder or resource, has
 * expired, or carries a generation older than the newest it has seen for that sandbox — before
 * anything changes — and records a newer generation as the newest. Which methods carry a lease,
 * and whether they must, is the caller's table (`LeasePolicy` per method).
 */
import { badRequest, SbxError } from '../errors.js';

/** `required`: no lease → 400; `optional`: served without one, a stale one refused; `none`: not fenced. */
export type LeasePolicy = 'required' | 'optional' | 'none';

export interface FencingLease {
  resource_id: string;
  holder_id: string;
  generation: number;
  expires_at: string;
}

/** The newest generation seen per resource (the worker's state). */
export interface GenerationLedger {
  generation(resourceId: string): number | null;
  /** Records `generation` when it is at least the newest; false (recording nothing) when it is older. */
  observeGeneration(resourceId: string, generation: number): boolean;
}

export interface FenceInput {
  policy: LeasePolicy;
  lease: FencingLease | undefined;
  /** The sandbox (or resource) the call names; null when it names none. */
  resourceId: string | null;
  workerId: string;
  now: Date;
  ledger: GenerationLedger;
}

/**
 * Judges one call's lease: the lease when it was checked and recorded, null when the call is served
 * without one. Throws 400 `bad_request` for a missing required lease and 403 `forbidden` for a
 * lease this worker must not obey.
 */
export function fence(i: FenceInput): FencingLease | null {
  if (i.policy === 'none') return null;
  const lease = i.lease;
  if (!lease) {
    if (i.policy === 'required') throw badRequest('this method needs a lease');
    return null;
  }
  if (i.resourceId === null) throw badRequest('this method names no sandbox to lease');
  if (lease.holder_id !== i.workerId) throw new SbxError('forbidden', `the lease is held by ${lease.holder_id}, not this worker`);
  if (lease.resource_id !== i.resourceId) throw new SbxError('forbidden', 'the lease is for another resource');
  if (!(Date.parse(lease.expires_at) > i.now.getTime())) throw new SbxError('forbidden', 'the lease has expired');
  if (!i.ledger.observeGeneration(i.resourceId, lease.generation)) {
    const newest = i.ledger.generation(i.resourceId);
    throw new SbxError(
      'forbidden',
      `the lease generation ${lease.generation} of ${i.resourceId} is older than generation ${newest ?? '?'}, ` +
        `the newest this worker has seen`,
    );
  }
  return lease;
}
