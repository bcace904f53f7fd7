/**
 * Reconciliation of remote-owned sandboxes (spec 3.1, DESIGN.md §7), at startup and every 30 s:
 * - the owning worker is missing, stale or offline → `unhealthy`, or `expired` with the lease
 *   released when past the TTL;
 * - a fresh draining worker keeps ownership (unchanged);
 * - a fresh worker is asked for its sandboxes (`worker.status_batch`, up to STATUS_BATCH a call;
 *   one `worker.status` each when it lacks the batch): a runtime gone → `destroyed`
 *   (lease released); an `unhealthy` one that runs → `running` again; a worker that does not
 *   answer → its running sandboxes `unhealthy` (reason `worker_unreachable`).
 * Every change publishes `reconcile.action` with the reason. Local rows are reconcileSandboxes'.
 */
import { sandboxPages } from './pages.js';
import { isSbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, RuntimeStatus, SandboxRecord, SandboxState, SandboxStore, WorkerRecord, WorkerStore } from '../ports/index.js';
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
/** Bound on each worker's status answer (one sandbox, or one batch). */
const STATUS_TIMEOUT_MS = 5_000;
const BATCH_TIMEOUT_MS = 30_000;
/** Sandboxes of one worker asked for in one batch (the wire's `worker.status_batch` bound). */
export const STATUS_BATCH = 1000;
/**
 * Sandboxes waiting for their worker's batch across all workers (a few MB of ids): past it, every
 * waiting batch is asked at once, so a fleet larger than this costs one more call per worker.
 */
const MAX_WAITING = 100_000;

/** What a pass keeps of a sandbox waiting for its worker's answer. */
type Asked = Pick<SandboxRecord, 'id' | 'state' | 'worker_id' | 'owner_id' | 'provider'> & { runtime_id: string };

export async function reconcileRemote(deps: RemoteReconcileDeps): Promise<RemoteReconcileAction[]> {
  const { store, locator, bus, clock } = deps;
  const actions: RemoteReconcileAction[] = [];
  const now = clock.now();
  const workers = new Map((await store.listWorkers()).map((w) => [w.id, w]));
  /** Workers found not answering in this pass: not asked again. */
  const silent = new Set<string>();
  const record = async (rec: Omit<Asked, 'runtime_id'>, state: SandboxState, action: string, reason: string) => {
    // Only if nothing moved the sandbox meanwhile (a destroy, a read that refreshed it).
    const current = await store.getSandbox(rec.id);
    if (!current || current.state !== rec.state) return;
    await store.updateSandbox(rec.id, { state, updated_at: clock.now().toISOString() });
    if (state === 'expired' || state === 'destroyed') await locator.leases.release(rec).catch(() => false);
    actions.push({ action, sandbox_id: rec.id, worker_id: rec.worker_id, reason });
    bus.publish({
      type: 'reconcile.action',
      sandbox_id: rec.id,
      owner_id: rec.owner_id ?? undefined,
      worker_id: rec.worker_id,
      data: { action, reason, provider: rec.provider },
    });
  };
  /** A worker that does not answer is offline whatever its last heartbeat says (killed a moment ago). */
  const unreachable = async (workerId: string, recs: Asked[]) => {
    silent.add(workerId);
    locator.markSilent(workerId);
    for (const rec of recs) if (rec.state === 'running') await record(rec, 'unhealthy', 'mark_unhealthy', 'worker_unreachable');
  };
  const judge = async (rec: Asked, status: RuntimeStatus) => {
    if (status === 'running' && rec.state === 'unhealthy') await record(rec, 'running', 'restore', 'worker_back');
    else if (status === 'missing') await record(rec, 'destroyed', 'mark_destroyed', 'runtime_lost');
  };
  /** One worker's waiting sandboxes: one batched call, or one call each to a worker without it. */
  const ask = async (worker: WorkerRecord, recs: Asked[]) => {
    if (silent.has(worker.id)) return unreachable(worker.id, recs);
    let statuses: Map<string, RuntimeStatus> | null;
    try {
      statuses = await locator.remoteStatuses(worker, recs, AbortSignal.timeout(BATCH_TIMEOUT_MS));
    } catch (err) {
      if (isSbxError(err) && err.code === 'unavailable') await unreachable(worker.id, recs);
      return; // judged again on a later pass
    }
    if (statuses !== null) {
      for (const rec of recs) {
        const status = statuses.get(rec.id);
        if (status !== undefined) await judge(rec, status);
      }
      return;
    }
    for (const [i, rec] of recs.entries()) {
      let status: RuntimeStatus;
      try {
        status = await locator.remoteProvider(worker, rec).status(rec.runtime_id, AbortSignal.timeout(STATUS_TIMEOUT_MS));
      } catch (err) {
        if (isSbxError(err) && err.code === 'unavailable') return unreachable(worker.id, recs.slice(i));
        continue; // judged again on a later pass
      }
      await judge(rec, status);
    }
  };

  // Page by page (DESIGN.md §13); the sandboxes of fresh workers wait in per-worker batches (a
  // bounded number in all), so each worker is asked once per STATUS_BATCH of its sandboxes.
  const waiting = new Map<string, Asked[]>();
  let waitingCount = 0;
  const flush = async (workerId: string) => {
    const recs = waiting.get(workerId) ?? [];
    waiting.delete(workerId);
    waitingCount -= recs.length;
    await ask(workers.get(workerId)!, recs);
  };
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
    // Fresh by its heartbeat (online, or draining: ownership kept): each sandbox is asked for.
    if (!rec.runtime_id || rec.state === 'error') continue;
    const asked: Asked = {
      id: rec.id,
      state: rec.state,
      worker_id: rec.worker_id,
      owner_id: rec.owner_id,
      provider: rec.provider,
      runtime_id: rec.runtime_id,
    };
    const batch = waiting.get(rec.worker_id) ?? [];
    if (batch.length === 0) waiting.set(rec.worker_id, batch);
    batch.push(asked);
    waitingCount++;
    if (batch.length >= STATUS_BATCH) await flush(rec.worker_id);
    else if (waitingCount >= MAX_WAITING) for (const workerId of [...waiting.keys()]) await flush(workerId);
  }
  for (const workerId of [...waiting.keys()]) await flush(workerId);
  return actions;
}
