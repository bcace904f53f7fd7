/**
 * Wiring of replicas on one database (DESIGN.md §7 "Replicas"): the replica's id and leases, the
 * event journal feed, admission's shared ledger, and the leader tasks. On a store of one
 * process's own (SQLite) the same calls give a replica that leads everything and a local bus.
 */
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { SharedAdmission } from '../core/admission/admission.js';
import { tryParseDuration } from '../shared/duration.js';
import type { EventBus } from '../core/events/bus.js';
import { JournalFeed } from '../core/events/journal-feed.js';
import type { Clock, IdSource, Store } from '../core/ports/index.js';
import { Replicas } from '../core/replicas/replicas.js';

/** Journal entries kept: far more than any replica's replay history. */
const JOURNAL_KEEP = 50_000;
const REPLICA_ID = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/;

export interface Replication {
  replicas: Replicas;
  /**
   * This node's worker id (DESIGN §7): its replica id on a shared store, so every replica's local
   * worker is one of its own; `local` for a lone node (SQLite).
   */
  workerId: string;
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
    // A start that fails later gives back the lease it took.
    await replicas.start();
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
    workerId: shared ? replicaId : 'local',
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

/**
 * The label on what this node's providers make — runtimes, mock/proot directories, the filtered
 * network and its firewall rules (DESIGN §7): the installation id alone for the worker `local`; for
 * a replica, the installation id and its worker id, so replicas on one engine or one mock root
 * each have their own network and clean up only their own leftovers. Kept short (docker names).
 */
export function runtimeLabel(installationId: string, workerId: string): string {
  if (workerId === 'local') return installationId;
  // Docker names keep 24 characters of it (the filtered network): the worker part fits in what is left.
  const room = Math.max(6, LABEL_MAX - installationId.length - 1);
  const plain = workerId.replace(/[^A-Za-z0-9_.-]/g, '');
  const id = plain === workerId && plain.length <= room ? plain : createHash('sha256').update(workerId).digest('hex').slice(0, room);
  return `${installationId}.${id}`;
}

const LABEL_MAX = 24;
