/**
 * Ports of a store that several `sbx serve` replicas share (DESIGN.md §7 "Replicas"): admission
 * reservations counted across replicas, and an event journal every replica reads in one order.
 * PostgreSQL supplies them; a store without them is one process's alone (SQLite).
 */
import type { EventInput, SbxEvent } from '../events/kinds.js';
import type { LiveCounts, SandboxRecord } from './sandbox-store.js';

/** A granted admission slot, stored until its sandbox row is (or the spawn fails). */
export interface SlotRequest {
  id: string;
  owner_id: string | null;
  /** The replica that granted it: its slots count only while its `replica:<id>` lease is live. */
  holder_id: string;
  /** Absolute backstop: a slot never counts past this, whatever its holder. */
  expires_at: string;
}

export interface SlotLedgerPort {
  /** Live sandboxes plus the reservations that still count, at `now`, in total and for `owners`. */
  count(now: string, owners: readonly string[]): Promise<LiveCounts>;
  /**
   * Under one lock shared by every replica: counts as `count` does, asks `decide`, and stores the
   * slot when it says yes. Resolves with the counts the decision saw and whether the slot is stored.
   */
  reserve(
    now: string,
    owners: readonly string[],
    slot: SlotRequest,
    decide: (counts: LiveCounts) => boolean,
  ): Promise<{ counts: LiveCounts; reserved: boolean }>;
  /** Drops one slot (committed or failed spawn). */
  drop(id: string): Promise<void>;
  /**
   * Stores a granted spawn's sandbox row and drops its slot in one step (one statement), so the
   * slot is never counted next to its row nor neither counted. False (and the slot dropped) when a
   * sandbox with this id exists.
   */
  insertSandbox(slotId: string, rec: SandboxRecord): Promise<boolean>;
  /** Drops every slot a replica holds (it starts afresh, so none of them is in flight). */
  dropHeldBy(holderId: string): Promise<number>;
}

/** A journalled event: the event with its journal id, and the replica that published it. */
export interface JournalEntry {
  event: SbxEvent;
  replica_id: string;
}

export interface EventJournalPort {
  /**
   * Appends events in the given order and announces them to every listener. Ids are assigned
   * under a lock held to commit, so ids commit in increasing order: a reader that has seen id N has
   * seen every id below N that will ever exist. Resolves with the entries as `after` reads them,
   * oldest first, so the appender need not read back its own.
   */
  append(replicaId: string, events: ReadonlyArray<{ timestamp: string; input: EventInput }>): Promise<JournalEntry[]>;
  /** Entries with id > `afterId`, oldest first, at most `limit`. */
  after(afterId: number, limit: number): Promise<JournalEntry[]>;
  /** The newest id, 0 when empty. */
  latestId(): Promise<number>;
  /**
   * Calls `onAnnounce` whenever another append may be readable (with the newest id it announces,
   * when known), and `onReconnect` after the
   * listening connection was lost and is back (a reader catches up from the journal then). The
   * connection retries with backoff until `stop` is called.
   */
  listen(onAnnounce: (newestId: number | null) => void, onReconnect: () => void): { stop(): Promise<void> };
  /** Deletes entries older than the newest `keep`; returns how many. */
  prune(keep: number): Promise<number>;
}

/** What a shared store adds to the Store port. */
export interface SharedState {
  slots: SlotLedgerPort;
  journal: EventJournalPort;
}
