/**
 * What `sbx serve` runs besides answering requests: startup reconciliation of this node's own
 * runtimes, remote reconciliation, and the leader tasks and timers (DESIGN.md §7 "Replicas").
 */
import type { Logger } from 'pino';
import type { EventBus } from '../core/events/bus.js';
import type { Clock, Store } from '../core/ports/index.js';
import type { ProviderRegistry } from '../core/providers/registry.js';
import type { Idempotency } from '../core/sandboxes/idempotency.js';
import type { ProcessService } from '../core/sandboxes/processes.js';
import { findOrphans, reconcileRecords, removeOrphans } from '../core/sandboxes/reconcile.js';
import { reconcileCatalog } from '../core/sandboxes/reconcile-catalog.js';
import { reconcileRemote } from '../core/sandboxes/reconcile-remote.js';
import type { SandboxService } from '../core/sandboxes/service.js';
import type { RuntimeLocator } from '../core/scheduler/locator.js';
import type { Replication } from './replicas.js';

export interface ReconcileStart {
  /** False: no reconciliation at all (tests). */
  run: boolean;
  store: Store;
  providers: ProviderRegistry;
  bus: EventBus;
  clock: Clock;
  locator: RuntimeLocator;
  /** The label on this node's runtimes: only those are ever judged orphans. */
  label: string;
  workerId: string;
  shared: boolean;
  logger: Logger;
  /** Runs after the records are judged (background processes, warm pools). */
  resume(): Promise<void>;
}

/**
 * Startup reconciliation: the records are judged before the server answers; the orphans (listed
 * now, so no later spawn's runtime is among them) and the snapshot and volume catalogue are
 * cleaned in the background, so a crash that left many runtimes behind does not hold the start.
 * Answers the background cleanup and the remote reconciliation pass (one at a time).
 */
export async function reconcileAtStart(o: ReconcileStart): Promise<{ cleanup: Promise<void>; reconcileWorkers(): Promise<void> }> {
  const { store, bus, clock, logger } = o;
  let cleanup: Promise<void> = Promise.resolve();
  if (o.run) {
    const rdeps = {
      store,
      providers: new Map(o.providers.all().map((p) => [p.name, p])),
      bus,
      clock,
      installationId: o.label,
      workerId: o.workerId,
      warm: store,
    };
    for (const a of await reconcileRecords(rdeps)) logger.info({ ...a }, 'reconcile');
    const orphans = await findOrphans(rdeps);
    cleanup = (async () => {
      for (const a of await removeOrphans(rdeps, orphans)) logger.info({ ...a }, 'reconcile');
      const catalog = await reconcileCatalog(rdeps).catch((err: unknown) => {
        logger.warn({ err: String(err) }, 'reconciling snapshots and volumes failed');
        return [];
      });
      for (const a of catalog) logger.info({ ...a }, 'reconcile');
    })().catch((err: unknown) => logger.warn({ err: String(err) }, 'startup cleanup failed'));
  }
  await o.resume();
  let reconciling = false;
  const reconcileWorkers = async () => {
    if (reconciling) return;
    reconciling = true;
    try {
      for (const a of await reconcileRemote({ store, locator: o.locator, bus, clock })) logger.info({ ...a }, 'reconcile');
    } catch (err) {
      logger.warn({ err: String(err) }, 'remote reconciliation pass failed');
    } finally {
      reconciling = false;
    }
  };
  // One process alone reconciles before it answers; replicas leave it to the reconcile leader.
  if (o.run && !o.shared) await reconcileWorkers();
  return { cleanup, reconcileWorkers };
}

export interface LeaderTaskDeps {
  replication: Replication;
  sandboxes: SandboxService;
  processes: ProcessService;
  idempotency: Idempotency;
  /** The remote reconciliation pass, or null when reconciliation is off. */
  reconcileWorkers: (() => Promise<void>) | null;
  reconcileEveryMs: number;
  /** Replicas with local providers reap their own sandboxes on a timer of their own. */
  reapLocal: boolean;
  /** Timers made here are pushed (the caller clears them on close). */
  timers: NodeJS.Timeout[];
  logger: Logger;
}

/** Leader tasks (DESIGN §7): on one replica at a time; alone, this process leads them all. */
export function startLeaderTasks(o: LeaderTaskDeps): void {
  const { replication, sandboxes, processes, logger, timers } = o;
  const { replicas } = replication;
  const reaperEveryMs = replication.reaperEveryMs;
  replicas.addTask({
    name: 'reaper',
    everyMs: reaperEveryMs,
    run: async (signal) => {
      // This node's own sandboxes are reaped below when replicas share the store.
      await sandboxes.reap({ local: !replicas.shared, remote: true, signal });
      await replication.pruneJournal();
      await o.idempotency.prune();
    },
  });
  // Each replica forgets the processes (records and output) of its sandboxes that are gone.
  timers.push(
    setInterval(
      () => void processes.sweep().catch((err: unknown) => logger.warn({ err: String(err) }, 'sweeping background processes failed')),
      reaperEveryMs,
    ),
  );
  const reconcile = o.reconcileWorkers;
  if (reconcile) replicas.addTask({ name: 'reconcile', everyMs: o.reconcileEveryMs, run: () => reconcile() });
  let reaping = false;
  const reapLocal = () => {
    if (reaping) return;
    reaping = true;
    sandboxes
      .reap({ local: true, remote: false })
      .catch((err: unknown) => logger.warn({ err: String(err) }, 'reaper pass failed'))
      .finally(() => (reaping = false));
  };
  if (o.reapLocal) timers.push(setInterval(reapLocal, reaperEveryMs));
}

/** How often idle sandboxes are looked for (DESIGN.md §16): the auto-pause windows are whole seconds or more. */
export const AUTO_PAUSE_EVERY_MS = 1_000;

/**
 * The auto-pause task (DESIGN.md §16): watches the running sandboxes that have `auto_pause`, then
 * pauses those idle for their window, one pass at a time. In memory on this node: each replica
 * watches the sandboxes whose traffic it serves.
 */
export async function startAutoPause(sandboxes: SandboxService, timers: NodeJS.Timeout[], logger: Logger): Promise<void> {
  await sandboxes.pauses
    .watchAtStart()
    .catch((err: unknown) => logger.warn({ err: String(err) }, 'watching sandboxes for auto-pause failed'));
  let passing = false;
  const pass = () => {
    if (passing) return;
    passing = true;
    sandboxes.pauses
      .pauseIdle()
      .catch((err: unknown) => logger.warn({ err: String(err) }, 'auto-pause pass failed'))
      .finally(() => (passing = false));
  };
  timers.push(setInterval(pass, AUTO_PAUSE_EVERY_MS));
}
