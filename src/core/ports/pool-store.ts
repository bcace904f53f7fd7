/** Pool tenants' uids (DESIGN.md §8): a counter per shared runtime, kept in the store. Re-exported by ports/index.ts. */

export interface PoolUidStore {
  /**
   * The next uid offset of a shared pool runtime — 0, 1, 2, … — atomically (one statement), so no
   * offset is ever given twice in that runtime's life, across restarts and replicas.
   */
  takePoolUid(runtimeId: string): Promise<number>;
  /** Forgets a destroyed runtime's counter (its id never comes back). Idempotent. */
  forgetPoolRuntime(runtimeId: string): Promise<void>;
}
