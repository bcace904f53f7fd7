/**
 * The worker's own small state (DESIGN.md §7): the newest lease generation seen per resource (for
 * fencing) and which runtime serves which sandbox, so a restarted worker keeps serving the runtimes
 * it had. The worker never sees the control plane's database.
 */
import type { EgressLists } from '../network/rules.js';

export interface WorkerRuntime {
  sandbox_id: string;
  provider: string;
  runtime_id: string;
  /** The token this worker's own preview host requires for the sandbox (null = open). */
  preview_token?: string | null;
  /** `filtered` for a sandbox whose egress this worker's gateway enforces (DESIGN §10); else null. */
  network?: string | null;
  /** The egress lists of a filtered sandbox, canonical (the control plane's, parsed again here). */
  egress?: EgressLists | null;
}

export interface WorkerState {
  getMeta(key: string): string | null;
  setMeta(key: string, value: string): void;
  /** The newest generation recorded for the resource, or null. */
  generation(resourceId: string): number | null;
  /**
   * Records `generation` as the newest seen when it is at least the newest (an equal one is a
   * retried call with the same lease). False, recording nothing, when it is older (fencing).
   */
  observeGeneration(resourceId: string, generation: number): boolean;
  putRuntime(rt: WorkerRuntime): void;
  getRuntime(sandboxId: string): WorkerRuntime | null;
  deleteRuntime(sandboxId: string): void;
  /** Replaces a runtime's egress lists (a PUT …/egress); false when this worker has no such runtime. */
  setEgress(sandboxId: string, lists: EgressLists): boolean;
  listRuntimes(): WorkerRuntime[];
  /** How many runtimes this worker keeps (its capacity counts them). */
  countRuntimes(): number;
  close(): void;
}
