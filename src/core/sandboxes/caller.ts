import { isPrivateOwner } from '../admission/owner.js';

/** Who is asking: the owner resolved at the edge (X-User-ID, owner_id) and whether it holds an admin credential. */
export interface Caller {
  owner_id: string | null;
  admin: boolean;
}

export const ANONYMOUS: Caller = { owner_id: null, admin: false };

/** With ownership enforced, whether `caller` may see a sandbox or event of `owner`: admins always; everyone when it has no explicit owner. */
export function ownerVisible(owner: string | null | undefined, caller: Caller): boolean {
  return caller.admin || !isPrivateOwner(owner) || owner === caller.owner_id;
}
