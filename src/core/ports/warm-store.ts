/** Warm runtimes (DESIGN.md §11): started ahead of demand, claimed by a spawn of their shape. Re-exported by ports/index.ts. */

export interface WarmRecord {
  /** The sandbox id the runtime was made for; the spawn that claims it gets this id. */
  sandbox_id: string;
  /** The shape key (provider, image, memory, vcpus, network) it serves. */
  shape: string;
  provider: string;
  runtime_id: string;
  /** The network it got, when the provider said. */
  network: string | null;
  /** The worker (this node's `local` worker id) whose provider runs it. */
  worker_id: string;
  created_at: string;
}

export interface WarmStore {
  insertWarm(rec: WarmRecord): Promise<void>;
  /**
   * Takes the oldest warm runtime of `shape` on `worker_id` out of the pool, atomically (one
   * statement): two spawns never get the same one. Null when none is ready.
   */
  claimWarm(shape: string, workerId: string): Promise<WarmRecord | null>;
  /** Sorted by shape, created_at, sandbox_id; all workers when none is named. */
  listWarm(workerId?: string): Promise<WarmRecord[]>;
  deleteWarm(sandboxId: string): Promise<boolean>;
}
