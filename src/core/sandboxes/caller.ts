import { isPrivateOwner } from '../admission/owner.js';

/** Who is asking: the owner resolved at the edge (X-User-ID, owner_id) and whether it holds an admin credential. */
export interface Caller {
  owner_id: string | null;
  admin: boolean;
}

export const ANONYMOUS: Caller = { owner_id: null, admin: false };

/**
 * With ownership enforced, whether `caller` may see a sandbox or event of `owner`: admins always;
 * everyone when it has no explicit owner.
 */
export function ownerVisible(owner: string | null | undefined, caller: Caller): boolean {
  return caller.admin || !isPrivateOwner(owner) || owner === caller.owner_id;
}

/** Whether `caller` may see a thing of `owner`: the one ownership rule of sandboxes, snapshots and volumes. */
export type OwnerRule = (owner: string | null | undefined, caller: Caller) => boolean;

/**
 * Ownership (DESIGN.md §3 "Auth"): with enforcement on, an owned thing is private to its owner and
 * admins (`ownerVisible`); with it off everyone sees everything. Read per call, as settings are.
 */
export function ownershipRule(settings: { readonly enforce_ownership: boolean }): OwnerRule {
  return (owner, caller) => !settings.enforce_ownership || ownerVisible(owner, caller);
}
