/**
 * Reconciliation of remote-owned sandboxes (spec 3.1, DESIGN.md §7), at startup and every 30 s:
 * - the owning worker is missing, stale or offline → `unhealthy`, or `expired` with the lease
 *   released when past the TTL;
 * - a fresh draining worker keeps ownership (unchanged);
 * - a fresh worker is asked for each sandbox (`worker.status`): a runtime gone → `destroyed`
 *   (lease released); an `unhealthy` one that runs → `running` again; a worker that does not
 *   answer → its running sandboxes `unhealthy` (reason `worker_unreachable`).
 * Every change publishes `reconcile.action` with the reason. Local rows are reconcileSandboxes'.
 */
import { sandboxPages } from './pages.js';
import { isSbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, RuntimeStatus, SandboxRecord, SandboxState, SandboxStore, WorkerStore } from '../ports.js';
import type { RuntimeLocator } from '../scheduler/locator.js';

export interface RemoteReconcileDeps {
  store: SandboxStore & WorkerStore;
  locator: RuntimeLocator;
  bus: EventBus;
  clock: Clock;
}

export interface RemoteReconcileAction {
  /** `mark_unhealthy`, `expire`, `restore`, `mark_destroyed`. */
  action: string;
  sandbox_id: string;
  worker_id: string;
  reason: string;
}

const LIVE: SandboxState[] = ['running', 'paused', 'unhealthy', 'error'];
/** Bound on each worker's status answer. */
const STATUS_TIMEOUT_MS = 5_000;

export async function reconcileRemote(deps: RemoteReconcileDeps): Promise<RemoteReconcileAction[]> {
  const { store, locator, bus, clock } = deps;
  const actions: RemoteReconcileAction[] = [];
  const now = clock.now();
  const workers = new Map((await store.listWorkers()).map((w) => [w.id, w]));
  /** Workers found not answering in this pass: not asked again. */
  const silent = new Set<string>();
  const record = async (rec: SandboxRecord, state: SandboxState, action: string, reason: string) => {
    // Only if nothing moved the sandbox meanwhile (a destroy, a read that refreshed it).
    const current = await store.getSandbox(rec.id);
    if (!current || current.state !== rec.state) return;
    await store.updateSandbox(rec.id, { state, updated_at: clock.now().toISOString() });
    if (state === 'expired' || state === 'destroyed') await locator.release(rec).catch(() => false);
    actions.push({ action, sandbox_id: rec.id, worker_id: rec.worker_id, reason });
    bus.publish({
      type: 'reconcile.action',
      sandbox_id: rec.id,
      owner_id: rec.owner_id ?? undefined,
      worker_id: rec.worker_id,
      data: { action, reason, provider: rec.provider },
    });
  };

  // Page by page (DESIGN.md §13): one page of records in memory however many sandboxes live.
  for await (const rec of sandboxPages(store, { states: LIVE })) {
    if (locator.isLocal(rec)) continue;
    const worker = workers.get(rec.worker_id);
    const pastTtl = Date.parse(rec.expires_at) <= now.getTime();
    const why = !worker
      ? 'worker_missing'
      : !locator.fresh(worker)
        ? worker.status === 'online' || worker.status === 'draining'
          ? 'worker_stale'
          : 'worker_offline'
        : null;
    if (why !== null) {
      if (pastTtl) await record(rec, 'expired', 'expire', why);
      else if (rec.state !== 'unhealthy') await record(rec, 'unhealthy', 'mark_unhealthy', why);
      continue;
    }
    // Fresh by its heartbeat (online, or draining: ownership kept): each sandbox is asked for. A
    // worker that does not answer is offline whatever its last heartbeat says (killed a moment
    // ago): its sandboxes become unhealthy and placement skips it until it heartbeats again.
    if (!rec.runtime_id || rec.state === 'error') continue;
    if (silent.has(rec.worker_id)) {
      if (rec.state === 'running') await record(rec, 'unhealthy', 'mark_unhealthy', 'worker_unreachable');
      continue;
    }
    let status: RuntimeStatus;
    try {
      status = await locator.remoteProvider(worker!, rec).status(rec.runtime_id, AbortSignal.timeout(STATUS_TIMEOUT_MS));
    } catch (err) {
      if (isSbxError(err) && err.code === 'unavailable') {
        silent.add(rec.worker_id);
        locator.markSilent(rec.worker_id);
        if (rec.state === 'running') await record(rec, 'unhealthy', 'mark_unhealthy', 'worker_unreachable');
      }
      continue; // judged again on a later pass
    }
    if (status === 'running' && rec.state === 'unhealthy') await record(rec, 'running', 'restore', 'worker_back');
    else if (status === 'missing') await record(rec, 'destroyed', 'mark_destroyed', 'runtime_lost');
  }
  return actions;
}
