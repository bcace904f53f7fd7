/**
 * Placement's slots for spawns still being created (DESIGN.md §7 "Placement", §13): a worker is
 * counted with the spawns placed on it but not yet stored, so concurrent spawns never place past
 * its `capacity.max_sandboxes`. Held in this process (a crashed control plane's slots lapse with
 * it; the worker's own refusal, 503, covers what another replica placed meanwhile).
 *
 * A slot handed over to its stored row stays counted for every placement whose count was read
 * before the row was stored (that read may have missed the row), and for none after: no decision
 * ever sees neither the row nor its slot.
 */

interface Slot {
  worker_id: string;
  owner_id: string | null;
  /** The tick its row was stored at; null while the spawn is in flight. */
  stored_at: number | null;
}

export interface PlacementSlot {
  /** The sandbox row is stored: the row counts from now on. */
  stored(): void;
  /** The spawn failed: nothing counts. */
  failed(): void;
}

/** One placement's view: begun before its counts are read, ended once it decided. */
export interface PlacementRead {
  /** Slots to add to the counts read: per worker, and per worker for `ownerId` (empty for null). */
  pending(ownerId: string | null): { by_worker: Map<string, number>; by_worker_for_owner: Map<string, number> };
  end(): void;
}

export class PlacementReservations {
  private tick = 0;
  private readonly slots = new Set<Slot>();
  /** The tick each open read began at. */
  private readonly reads = new Set<{ at: number }>();

  /** Starts a placement's read: call before reading the stored counts. */
  begin(): PlacementRead {
    const read = { at: ++this.tick };
    this.reads.add(read);
    const counts = (s: Slot) => s.stored_at === null || s.stored_at > read.at;
    return {
      pending: (ownerId) => {
        const by_worker = new Map<string, number>();
        const by_worker_for_owner = new Map<string, number>();
        for (const s of this.slots) {
          if (!counts(s)) continue;
          by_worker.set(s.worker_id, (by_worker.get(s.worker_id) ?? 0) + 1);
          if (ownerId !== null && s.owner_id === ownerId)
            by_worker_for_owner.set(s.worker_id, (by_worker_for_owner.get(s.worker_id) ?? 0) + 1);
        }
        return { by_worker, by_worker_for_owner };
      },
      end: () => {
        this.reads.delete(read);
        this.sweep();
      },
    };
  }

  /** Holds a slot on `workerId` for one spawn (call while the read that chose it is open). */
  hold(workerId: string, ownerId: string | null): PlacementSlot {
    const slot: Slot = { worker_id: workerId, owner_id: ownerId, stored_at: null };
    this.slots.add(slot);
    return {
      stored: () => {
        if (slot.stored_at !== null || !this.slots.has(slot)) return;
        slot.stored_at = ++this.tick;
        this.sweep();
      },
      failed: () => {
        this.slots.delete(slot);
      },
    };
  }

  /** Slots held or still visible to an open read (diagnostics, tests). */
  get size(): number {
    return this.slots.size;
  }

  /** Drops stored slots no open read can have missed the row of. */
  private sweep(): void {
    let oldest = Number.POSITIVE_INFINITY;
    for (const r of this.reads) oldest = Math.min(oldest, r.at);
    for (const s of this.slots) if (s.stored_at !== null && s.stored_at < oldest) this.slots.delete(s);
  }
}
