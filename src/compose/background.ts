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
import { AUDIT_EVERY_MS } from '../transports/http/plugins/audit.js';
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

/**
 * One background task of `sbx serve`. A leader task runs on one replica at a time (a lease,
 * DESIGN §7; alone, this process leads them all) and stops with the replication; any other runs
 * on every replica on a timer of its own. Either runs one pass at a time; a failed pass is logged.
 */
export interface BackgroundTask {
  name: string;
  /** Milliseconds between passes. */
  every: number;
  leader: boolean;
  /** A pass at the start too, not only after the first period (local tasks; leader tasks always do). */
  atStart?: boolean;
  run(signal?: AbortSignal): Promise<unknown>;
}

export interface BackgroundDeps {
  replication: Replication;
  sandboxes: SandboxService;
  processes: ProcessService;
  idempotency: Idempotency;
  /** The remote reconciliation pass, or null when reconciliation is off. */
  reconcileWorkers: (() => Promise<void>) | null;
  reconcileEveryMs: number;
  /** Replicas with local providers reap their own sandboxes on a timer of their own. */
  reapLocal: boolean;
  /** The local worker's heartbeat, or null for a node that is no worker. */
  heartbeat: (() => Promise<void>) | null;
  heartbeatEveryMs: number;
  /** Admin audit pruning (`auth.admin_audit_retention`), or null when records are kept forever. */
  pruneAudit: (() => Promise<unknown>) | null;
}

/** The background tasks of `sbx serve`, one table: what runs, how often, and whether one replica leads it. */
export function backgroundTasks(o: BackgroundDeps): BackgroundTask[] {
  const { replication, sandboxes, processes } = o;
  const { replicas } = replication;
  const every = replication.reaperEveryMs;
  const tasks: Array<BackgroundTask | false> = [
    {
      name: 'reaper',
      every,
      leader: true,
      run: async (signal) => {
        // This node's own sandboxes are reaped by `local-reaper` when replicas share the store.
        await sandboxes.reap({ local: !replicas.shared, remote: true, signal });
        await replication.pruneJournal();
        await o.idempotency.prune();
      },
    },
    o.reconcileWorkers !== null && { name: 'reconcile', every: o.reconcileEveryMs, leader: true, run: o.reconcileWorkers },
    // Each replica forgets the processes (records and output) of its sandboxes that are gone.
    { name: 'process-sweep', every, leader: false, run: () => processes.sweep() },
    o.reapLocal && { name: 'local-reaper', every, leader: false, run: () => sandboxes.reap({ local: true, remote: false }) },
    // In memory on this node: each replica watches the sandboxes whose traffic it serves (DESIGN §16).
    { name: 'auto-pause', every: AUTO_PAUSE_EVERY_MS, leader: false, run: () => sandboxes.pauses.pauseIdle() },
    o.heartbeat !== null && { name: 'heartbeat', every: o.heartbeatEveryMs, leader: false, run: o.heartbeat },
    o.pruneAudit !== null && { name: 'audit-prune', every: AUDIT_EVERY_MS, leader: false, atStart: true, run: o.pruneAudit },
  ];
  return tasks.filter((t): t is BackgroundTask => t !== false);
}

/** Starts every task of the table in one loop; `stop` clears the local timers (leader tasks end with the replication). */
export function startBackground(tasks: BackgroundTask[], replicas: Replication['replicas'], logger: Logger): { stop(): void } {
  const timers: NodeJS.Timeout[] = [];
  for (const task of tasks) {
    if (task.leader) {
      replicas.addTask({ name: task.name, everyMs: task.every, run: (signal) => task.run(signal) });
      continue;
    }
    let running = false;
    const pass = () => {
      if (running) return;
      running = true;
      task
        .run()
        .catch((err: unknown) => logger.warn({ task: task.name, err: String(err) }, `${task.name} pass failed`))
        .finally(() => (running = false));
    };
    if (task.atStart) pass();
    const timer = setInterval(pass, task.every);
    timer.unref();
    timers.push(timer);
  }
  return {
    stop: () => {
      for (const t of timers) clearInterval(t);
    },
  };
}

/** How often idle sandboxes are looked for (DESIGN.md §16): the auto-pause windows are whole seconds or more. */
export const AUTO_PAUSE_EVERY_MS = 1_000;
