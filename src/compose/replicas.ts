/**
 * Wiring of replicas on one database (DESIGN.md §7 "Replicas"): the replica's id and leases, the
 * event journal feed, admission's shared ledger, and the leader tasks. On a store of one
 * process's own (SQLite) the same calls give a replica that leads everything and a local bus.
 */
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { SharedAdmission } from '../core/admission/admission.js';
import { tryParseDuration } from '../core/duration.js';
import type { EventBus } from '../core/events/bus.js';
import { JournalFeed } from '../core/events/journal-feed.js';
import type { Clock, IdSource, Store } from '../core/ports.js';
import { Replicas } from '../core/replicas/replicas.js';

/** Journal entries kept: far more than any replica's replay history. */
const JOURNAL_KEEP = 50_000;
const REPLICA_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export interface Replication {
  replicas: Replicas;
  feed: JournalFeed | null;
  admission: SharedAdmission | undefined;
  reaperEveryMs: number;
  /** Prunes the journal (the reaper leader's chore). */
  pruneJournal(): Promise<void>;
  close(): Promise<void>;
}

/** `server.replica_id`, or hostname:port (hostname:pid when the port is chosen by the system). */
export function replicaIdOf(config: SbxConfig): string {
  const id = config.server.replica_id || `${hostname()}:${config.server.port || process.pid}`;
  if (!REPLICA_ID.test(id)) throw new Error(`server.replica_id must be 1-128 letters, digits or . _ : @ - (got ${JSON.stringify(id)})`);
  return id;
}

export async function startReplication(deps: {
  config: SbxConfig;
  store: Store;
  bus: EventBus;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
}): Promise<Replication> {
  const { config, store, bus, clock, ids, logger } = deps;
  const replicaId = replicaIdOf(config);
  const shared = store.shared;
  const replicas = new Replicas({
    leases: store,
    clock,
    replicaId,
    ttlMs: tryParseDuration(config.server.leader_ttl) ?? 15_000,
    shared: shared !== undefined,
    warn: (fields, msg) => logger.warn(fields, msg),
  });
  let feed: JournalFeed | null = null;
  try {
    // A refused start (another replica runs the local worker) gives back the leases it took.
    await replicas.start({ localWorker: config.server.local_worker !== false });
    if (shared) {
      // This replica starts afresh: none of the slots it held before is still being spawned.
      await shared.slots.dropHeldBy(replicaId);
      feed = new JournalFeed(shared.journal, bus, replicaId, (fields, msg) => logger.warn(fields, msg));
      await feed.start();
    }
  } catch (err) {
    await replicas.close();
    throw err;
  }
  return {
    replicas,
    feed,
    admission: shared ? { slots: shared.slots, replicaId, slotId: () => ids.randomId(12) } : undefined,
    reaperEveryMs: tryParseDuration(config.server.reaper_interval) ?? 10_000,
    async pruneJournal() {
      if (shared) await shared.journal.prune(JOURNAL_KEEP);
    },
    async close() {
      await replicas.close();
      await feed?.stop();
    },
  };
}
