/**
 * A worker's own capacity (DESIGN.md §7): `capacity.max_sandboxes` counts the runtimes it keeps
 * plus the spawns it is serving now, so concurrent spawns never pass the limit whatever the
 * control planes placed. Checked and taken synchronously: two calls can never take the last slot.
 */
import { unavailable } from '../errors.js';

export interface SpawnSlot {
  /** The spawn ended (its runtime is recorded, or it failed): the slot is no longer in flight. */
  done(): void;
}

export class SpawnSlots {
  private inFlight = 0;

  /**
   * @param max `max_sandboxes` (0 = no limit)
   * @param kept how many runtimes this worker keeps now
   */
  constructor(
    private readonly workerId: string,
    private readonly max: () => number,
    private readonly kept: () => number,
  ) {}

  /** A slot for one spawn, or 503 `unavailable` when the worker is full. */
  take(): SpawnSlot {
    const max = this.max();
    if (max > 0 && this.kept() + this.inFlight >= max)
      throw unavailable(`worker ${this.workerId} is full: it runs its maximum of ${max} sandboxes`);
    this.inFlight++;
    let done = false;
    return {
      done: () => {
        if (done) return;
        done = true;
        this.inFlight--;
      },
    };
  }
}
