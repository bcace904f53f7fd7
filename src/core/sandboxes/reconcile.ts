import type { EventBus } from '../events/bus.js';
import type { Clock, Provider, RuntimeStatus, SandboxRecord, SandboxState, SandboxStore, WarmStore } from '../ports.js';

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
const LIVE: SandboxState[] = ['running', 'unhealthy', 'error'];
/** Bound on each provider call, so one wedged backend cannot hold startup forever. */
const CALL_TIMEOUT_MS = 30_000;

/**
 * Startup reconciliation (spec 3.1): brings the store and the runtimes of this worker back in
 * line. A live record whose runtime is gone becomes `destroyed` (`expired` past its TTL); a live
 * record past its TTL has its runtime torn down and becomes `expired`; a live record whose runtime
 * stopped (killed from outside, host restart) has it torn down and becomes `destroyed`, since
 * nothing here restarts it (`unhealthy` is for remote-owned sandboxes whose worker went stale);
 * a runtime labelled with THIS installation id that no live record owns is removed. Runtimes of
 * other installations, and unlabelled ones, are never touched. A provider that cannot answer is
 * skipped and none of its sandboxes is judged: reconciliation never blocks startup.
 */
export async function reconcileSandboxes(deps: ReconcileDeps): Promise<{ actions: ReconcileAction[] }> {
  const { store, providers, clock, workerId } = deps;
  const actions: ReconcileAction[] = [];
  const record = (a: ReconcileAction) => {
    actions.push(a);
    deps.bus.publish({
      type: 'reconcile.action',
      sandbox_id: a.sandbox_id,
      worker_id: workerId,
      data: { action: a.action, provider: a.provider, runtime_id: a.runtime_id ?? null },
    });
  };
  const now = clock.now();
  const setState = (rec: SandboxRecord, state: SandboxState) => store.updateSandbox(rec.id, { state, updated_at: now.toISOString() });

  const mine = await store.listSandboxes({ states: LIVE, worker_id: workerId });
  for (const rec of mine) {
    const provider = providers.get(rec.provider);
    if (!provider) continue; // not configured on this node: nothing to compare against
    const base = { sandbox_id: rec.id, runtime_id: rec.runtime_id ?? undefined, provider: rec.provider };
    const pastTtl = Date.parse(rec.expires_at) <= now.getTime();
    let status: RuntimeStatus = 'missing';
    if (rec.runtime_id) {
      try {
        status = await provider.status(rec.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        continue; // backend down: judge this sandbox on a later start
      }
    }
    if (status === 'missing') {
      await setState(rec, pastTtl ? 'expired' : 'destroyed');
      record({ action: pastTtl ? 'mark_expired' : 'mark_destroyed', ...base });
    } else if (pastTtl) {
      try {
        await provider.destroy(rec.runtime_id!, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        continue; // the reaper retries the teardown
      }
      await setState(rec, 'expired');
      record({ action: 'expire', ...base });
    } else if (status === 'stopped') {
      try {
        await provider.destroy(rec.runtime_id!, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        continue; // judged again on the next start, or by the reaper once it is `error`
      }
      await setState(rec, 'destroyed');
      record({ action: 'destroy_stopped', ...base });
    }
  }

  // Orphans: compare against every live record (any worker), by runtime id.
  const owned = new Set((await store.listSandboxes({ states: LIVE })).flatMap((r) => (r.runtime_id ? [`${r.provider}\0${r.runtime_id}`] : [])));
  for (const w of (await deps.warm?.listWarm()) ?? []) owned.add(`${w.provider}\0${w.runtime_id}`);
  for (const [name, provider] of providers) {
    if (!provider.listRuntimes) continue;
    let runtimes;
    try {
      runtimes = await provider.listRuntimes(AbortSignal.timeout(CALL_TIMEOUT_MS));
    } catch {
      continue;
    }
    for (const rt of runtimes) {
      if (rt.installation_id !== deps.installationId) continue;
      if (owned.has(`${name}\0${rt.runtime_id}`)) continue;
      try {
        await provider.destroy(rt.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS));
      } catch {
        continue;
      }
      record({ action: 'remove_orphan', sandbox_id: rt.sandbox_id ?? undefined, runtime_id: rt.runtime_id, provider: name });
    }
  }
  return { actions };
}
