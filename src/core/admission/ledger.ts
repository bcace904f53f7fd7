/**
 * Where admission counts and reserves (DESIGN.md §7, §13). A decision sees live sandboxes plus the
 * slots granted to spawns not yet stored. In one process those slots are a counter
 * (`LocalLedger`); with replicas on one database they are rows counted and inserted under a lock
 * every replica takes (`SharedLedger`), so no two replicas can grant the same last slot.
 */
import { conflict } from '../errors.js';
import type { Clock, LiveCounts, SandboxRecord, SandboxStore, SlotLedgerPort } from '../ports/index.js';

/** Active sandboxes as a decision sees them. */
export interface Counts {
  total: number;
  byOwner: Map<string, number>;
  /** Earliest expires_at (ms) among the live sandboxes: when capacity opens by itself. */
  nextExpiryMs: number | null;
}

/** A granted slot: counted as active until released (after the sandbox is stored, or on failure). */
export interface AdmissionTicket {
  /**
   * Stores the sandbox and hands the slot over to its row: no decision ever sees neither (which
   * would over-admit).
   */
  commit<T>(store: () => Promise<T>): Promise<T>;
  /** `commit` of storing `rec`, in as few steps as the ledger can (one statement with shared slots). */
  insert(rec: SandboxRecord): Promise<void>;
  /** Gives the slot back (a failed spawn); a no-op once committed. */
  release(): void;
}

export interface Ledger {
  /** How often a non-empty queue looks again without a wake (capacity freed elsewhere); null: never. */
  readonly recheckMs: number | null;
  count(owners: ReadonlyArray<string | null>): Promise<Counts>;
  /** Counts, asks `decide`, and grants a slot when it says yes — with nothing counted in between. */
  tryReserve(
    owner: string | null,
    owners: ReadonlyArray<string | null>,
    decide: (c: Counts) => boolean,
  ): Promise<{ counts: Counts; ticket: AdmissionTicket | null }>;
  /** A slot for a spawn no limit applies to: granted without counting. */
  grant(owner: string | null): AdmissionTicket;
}

const named = (owners: ReadonlyArray<string | null>) => [...new Set(owners.filter((o): o is string => typeof o === 'string' && o !== ''))];

function countsOf(c: LiveCounts): Counts {
  return {
    total: c.total,
    byOwner: new Map(Object.entries(c.by_owner)),
    nextExpiryMs: c.next_expiry === null ? null : Date.parse(c.next_expiry),
  };
}

/**
 * One process's slots: a counter. Callers run `tryReserve` inside admission's serialized section,
 * and commit/release queue on the same chain (`serialize`), so a count never falls between a row
 * being stored and its slot being dropped.
 */
export class LocalLedger implements Ledger {
  // Every release in this process wakes the queue: no need to look again on a timer.
  readonly recheckMs = null;
  private pending = new Map<string, number>();
  private pendingTotal = 0;

  constructor(
    private readonly store: SandboxStore,
    private readonly clock: Clock,
    private readonly serialize: <T>(fn: () => Promise<T>) => Promise<T>,
    private readonly onRelease: () => void,
  ) {}

  async count(owners: ReadonlyArray<string | null>): Promise<Counts> {
    const c = countsOf(await this.store.countLive(this.clock.now().toISOString(), named(owners)));
    c.total += this.pendingTotal;
    for (const [o, n] of this.pending) if (c.byOwner.has(o) || owners.includes(o)) c.byOwner.set(o, (c.byOwner.get(o) ?? 0) + n);
    return c;
  }

  async tryReserve(
    owner: string | null,
    owners: ReadonlyArray<string | null>,
    decide: (c: Counts) => boolean,
  ): Promise<{ counts: Counts; ticket: AdmissionTicket | null }> {
    const counts = await this.count(owners);
    return { counts, ticket: decide(counts) ? this.reserve(owner) : null };
  }

  grant(owner: string | null): AdmissionTicket {
    return this.reserve(owner);
  }

  private reserve(ownerId: string | null): AdmissionTicket {
    this.pendingTotal++;
    if (ownerId) this.pending.set(ownerId, (this.pending.get(ownerId) ?? 0) + 1);
    let released = false;
    const drop = () => {
      this.pendingTotal--;
      if (ownerId) {
        const n = (this.pending.get(ownerId) ?? 1) - 1;
        if (n <= 0) this.pending.delete(ownerId);
        else this.pending.set(ownerId, n);
      }
    };
    const commit = <T>(store: () => Promise<T>): Promise<T> =>
      this.serialize(async () => {
        const out = await store();
        if (!released) {
          released = true;
          drop();
        }
        return out;
      });
    return {
      commit,
      insert: (rec) => commit(() => this.store.insertSandbox(rec)),
      release: () => {
        if (released) return;
        released = true;
        void this.serialize(async () => drop()).finally(this.onRelease);
      },
    };
  }
}

/** How long a slot counts at most, whatever its replica: a spawn never takes longer. */
const SLOT_BACKSTOP_MS = 15 * 60_000;

/** Slots as rows every replica counts (PostgreSQL). */
export class SharedLedger implements Ledger {
  // Another replica's release wakes this queue through the event journal; this is the backstop.
  readonly recheckMs = 1_000;
  constructor(
    private readonly slots: SlotLedgerPort,
    private readonly store: SandboxStore,
    private readonly clock: Clock,
    private readonly holderId: string,
    private readonly slotId: () => string,
    private readonly onRelease: () => void,
  ) {}

  async count(owners: ReadonlyArray<string | null>): Promise<Counts> {
    return countsOf(await this.slots.count(this.clock.now().toISOString(), named(owners)));
  }

  async tryReserve(
    owner: string | null,
    owners: ReadonlyArray<string | null>,
    decide: (c: Counts) => boolean,
  ): Promise<{ counts: Counts; ticket: AdmissionTicket | null }> {
    const now = this.clock.now();
    const id = this.slotId();
    const slot = { id, owner_id: owner, holder_id: this.holderId, expires_at: new Date(now.getTime() + SLOT_BACKSTOP_MS).toISOString() };
    const r = await this.slots.reserve(now.toISOString(), named(owners), slot, (c) => decide(countsOf(c)));
    return { counts: countsOf(r.counts), ticket: r.reserved ? this.ticket(id) : null };
  }

  grant(): AdmissionTicket {
    // No limit reads a count this spawn could change: nothing to store.
    return { commit: (store) => store(), insert: (rec) => this.store.insertSandbox(rec), release: () => undefined };
  }

  private ticket(id: string): AdmissionTicket {
    let released = false;
    // A slot that cannot be dropped (database away) stops counting with its backstop expiry.
    const drop = () => this.slots.drop(id).catch(() => undefined);
    return {
      // The row first, then the slot: in between both count (briefly under-admitting), never neither.
      commit: async <T>(store: () => Promise<T>): Promise<T> => {
        const out = await store();
        if (!released) {
          released = true;
          await drop();
        }
        return out;
      },
      // The row and the slot's drop in one statement: no window where both or neither count.
      insert: async (rec: SandboxRecord): Promise<void> => {
        if (released) {
          await this.store.insertSandbox(rec);
          return;
        }
        // A failed statement changed nothing: the slot stays for `release` to drop.
        const stored = await this.slots.insertSandbox(id, rec);
        released = true;
        if (!stored) throw conflict(`sandbox "${rec.id}" already exists`);
      },
      release: () => {
        if (released) return;
        released = true;
        void drop().finally(this.onRelease);
      },
    };
  }
}
