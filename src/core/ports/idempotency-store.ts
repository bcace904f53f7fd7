/** Spawn idempotency keys (a Store role). */

/** A spawn's idempotency key (DESIGN.md §10). */
export interface IdempotencyRecord {
  /** The owner the key belongs to; '' when the spawn has none. */
  owner_key: string;
  key: string;
  /** Hash of the request the key was first used with. */
  request_hash: string;
  /** The sandbox it made; null while the first request is still spawning. */
  sandbox_id: string | null;
  created_at: string;
}

export interface IdempotencyStore {
  /** Stores the key unless (owner_key, key) exists; true when this call stored it. */
  claimIdempotency(rec: Omit<IdempotencyRecord, 'sandbox_id'>): Promise<boolean>;
  getIdempotency(ownerKey: string, key: string): Promise<IdempotencyRecord | null>;
  /** Records the sandbox of the claim made at `created_at`. */
  completeIdempotency(ownerKey: string, key: string, createdAt: string, sandboxId: string): Promise<void>;
  /**
   * Deletes the claim made at `created_at` (a failed first spawn, or an expired or abandoned key);
   * `pendingOnly` keeps one that has its sandbox. True when a row was deleted.
   */
  dropIdempotency(ownerKey: string, key: string, createdAt: string, pendingOnly: boolean): Promise<boolean>;
  /** Deletes keys created before `before`; returns how many. */
  pruneIdempotency(before: string): Promise<number>;
}
