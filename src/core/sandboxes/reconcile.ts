import type { EventBus } from '../events/bus.js';
import type { Clock, Provider, RuntimeStatus, SandboxRecord, SandboxState, SandboxStore, WarmStore } from '../ports/index.js';

export interface ReconcileDeps {
  store: SandboxStore;
  providers: Map<string, Provider>;
  bus: EventBus;
  clock: Clock;
  installationId: string;
  workerId: string;
  /** Warm runtimes (DESIGN.md §11) are owned too: the warm pool checks and adopts them itself. */
  warm?: Pick<WarmStore, 'listWarm'>;
}

export interface ReconcileAction {
  /** `mark_destroyed`, `mark_expired`, `expire`, `destroy_stopped` or `remove_orphan`. */
  action: string;
  sandbox_id?: string;
  runtime_id?: string;
  provider: string;
}

/** States whose runtime should exist. */
const LIVE: SandboxState[] = ['running', 'paused', 'unhealthy', 'error'];
/** Bound on each provider call, so one wedged backend cannot hold startup forever. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * Startup reconciliation (spec 3.1): brings the store and the runtimes of this worker back in
 * line. A live record whose runtime is gone becomes `destroyed` (`expired` past its TTL); a live
 * record past its TTL has its runtime torn down and becomes `expired`; a live record whose runtime
 * stopped (killed from outside, host restart) has it torn down and becomes `destroyed`, since
 * nothing here restarts it (`unhealthy` is for sandboxes whose worker went stale or whose replica
 * stopped: one of this worker's whose runtime still runs is `running` again);
 * a runtime labelled with THIS installation id that no live record owns is removed. Runtimes of
 * other installations, and unlabelled ones, are never touched. A provider that cannot answer is
 * skipped and none of its sandboxes is judged: reconciliation never blocks startup.
 */
export async function reconcileSandboxes(deps: ReconcileDeps): Promise<{ actions: ReconcileAction[] }> {
  const actions = await reconcileRecords(deps);
  const orphans = await findOrphans(deps);
  return { actions: [...actions, ...(await removeOrphans(deps, orphans))] };
}

/** A runtime labelled with this installation that no live record (nor warm pool) owns. */
export interface Orphan {
  provider: string;
  runtime_id: string;
  sandbox_id: string | null;
}

function recorder(deps: ReconcileDeps, actions: ReconcileAction[]): (a: ReconcileAction) => void {
  return (a) => {
    actions.push(a);
    deps.bus.publish({
      type: 'reconcile.action',
      sandbox_id: a.sandbox_id,
      worker_id: deps.workerId,
      data: { action: a.action, provider: a.provider, runtime_id: a.runtime_id ?? null },
    });
  };
}

/** The records of this worker judged against their runtimes (the part that must finish before serving). */
export async function reconcileRecords(deps: ReconcileDeps): Promise<ReconcileAction[]> {
  const { store, providers, clock, workerId } = deps;
  const actions: ReconcileAction[] = [];
  const record = recorder(deps, actions);
  const now = clock.now();
  const setState = (rec: SandboxRecord, state: SandboxState) => store.updateSandbox(rec.id, { state, updated_at: now.toISOString() });

  const mine = await store.listSandboxes({ states: LIVE, worker_id: workerId });
  // Sandboxes are independent: judged a few at a time, so a restart after a crash with dozens of
  // runtimes to look at or remove does not wait for each engine call in turn.
  await eachLimited(mine, PARALLEL, async (rec) => {
    const provider = providers.get(rec.provider);
    if (!provider) return; // not configured on this node: nothing to compare against
    const base = { sandbox_id: rec.id, runtime_id: rec.runtime_id ?? undefined, provider: rec.provider };
    const pastTtl = Date.parse(rec.expires_at) <= now.getTime();
    let status: RuntimeStatus = 'missing';
    if (rec.runtime_id) {
      try {
        status = await provider.status(rec.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        return; // backend down: judge this sandbox on a later start
      }
    }
    if (status === 'missing') {
      await setState(rec, pastTtl ? 'expired' : 'destroyed');
      record({ action: pastTtl ? 'mark_expired' : 'mark_destroyed', ...base });
    } else if (pastTtl) {
      try {
        await provider.destroy(rec.runtime_id!, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        return; // the reaper retries the teardown
      }
      await setState(rec, 'expired');
      record({ action: 'expire', ...base });
    } else if (status === 'stopped') {
      try {
        await provider.destroy(rec.runtime_id!, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        return; // judged again on the next start, or by the reaper once it is `error`
      }
      await setState(rec, 'destroyed');
      record({ action: 'destroy_stopped', ...base });
    } else if (status === 'running' && rec.state === 'unhealthy') {
      // A replica back after a stop (DESIGN §7): the others marked its sandboxes unhealthy; they run.
      await setState(rec, 'running');
      record({ action: 'restore', ...base });
    } else if (status === 'paused' && rec.state !== 'paused') {
      // DESIGN §16: a frozen runtime (docker keeps its pause across a restart) is paused, never stopped.
      await setState(rec, 'paused');
      record({ action: 'mark_paused', ...base });
    } else if (status === 'running' && rec.state === 'paused') {
      // mock and proot lose their processes, and the freezer with them, on a restart: the sandbox runs.
      await setState(rec, 'running');
      record({ action: 'mark_running', ...base });
    }
  });

  return actions;
}

/**
 * The orphans now: compared against every live record (any worker) and the warm pool, by runtime
 * id. Taken before the server answers, the list cannot hold a runtime of a spawn made afterwards,
 * so removing them may then go on in the background.
 */
export async function findOrphans(deps: ReconcileDeps): Promise<Orphan[]> {
  const owned = new Set(
    (await deps.store.listSandboxes({ states: LIVE })).flatMap((r) => (r.runtime_id ? [`${r.provider}\0${r.runtime_id}`] : [])),
  );
  for (const w of (await deps.warm?.listWarm()) ?? []) owned.add(`${w.provider}\0${w.runtime_id}`);
  const out: Orphan[] = [];
  for (const [name, provider] of deps.providers) {
    if (!provider.listRuntimes) continue;
    let runtimes;
    try {
      runtimes = await provider.listRuntimes(AbortSignal.timeout(CALL_TIMEOUT_MS));
    } catch {
      continue;
    }
    for (const rt of runtimes) {
      if (rt.installation_id === deps.installationId && !owned.has(`${name}\0${rt.runtime_id}`))
        out.push({ provider: name, runtime_id: rt.runtime_id, sandbox_id: rt.sandbox_id });
    }
  }
  return out;
}

/** Removes the orphans a few at a time, at once (nobody owns them: no graceful stop to wait for). */
export async function removeOrphans(deps: ReconcileDeps, orphans: readonly Orphan[]): Promise<ReconcileAction[]> {
  const actions: ReconcileAction[] = [];
  const record = recorder(deps, actions);
  await eachLimited(orphans, PARALLEL, async (o) => {
    const provider = deps.providers.get(o.provider);
    if (!provider) return;
    try {
      const signal = AbortSignal.timeout(CALL_TIMEOUT_MS);
      await (provider.discard ? provider.discard(o.runtime_id, signal) : provider.destroy(o.runtime_id, signal));
    } catch {
      return;
    }
    record({ action: 'remove_orphan', sandbox_id: o.sandbox_id ?? undefined, runtime_id: o.runtime_id, provider: o.provider });
  });
  return actions;
}

/** Provider calls a startup reconciliation has in flight at once. */
const PARALLEL = 8;

/** Runs `fn` over the items, at most `limit` at a time; resolves when all have settled. */
async function eachLimited<T>(items: readonly T[], limit: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
}
