/** Who is asking: the owner resolved at the edge (X-User-ID, owner_id) and whether it holds an admin credential. */
export interface Caller {
  owner_id: string | null;
  admin: boolean;
}

export const ANONYMOUS: Caller = { owner_id: null, admin: false };
