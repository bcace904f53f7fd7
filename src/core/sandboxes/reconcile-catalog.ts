/**
 * Startup reconciliation of snapshots and volumes (DESIGN.md §10): a snapshot or volume a provider
 * holds under this installation's label with no record (a server that died between making it and
 * storing it) is removed once it is older than a grace period (a replica may be storing it right
 * now); a record whose snapshot or volume is gone from its provider is reported, never deleted —
 * the record is the user's, and the next use of it says what is missing. A fork image (DESIGN.md
 * §16) no live sandbox started from (its last fork went while this server was down, or its removal
 * failed) is removed past the same grace period.
 */
import type { EventBus } from '../events/bus.js';
import type { Clock, Provider, SandboxStore, SnapshotStore, VolumeStore } from '../ports/index.js';
import type { ReconcileAction } from './reconcile.js';

export interface CatalogReconcileDeps {
  store: SnapshotStore & VolumeStore & Pick<SandboxStore, 'sandboxesOfFork'>;
  providers: Map<string, Provider>;
  bus: EventBus;
  clock: Clock;
  /** This node's worker id: records kept by other workers are theirs to judge. */
  workerId: string;
  /** Leftovers younger than this are left alone (default 10 minutes). */
  graceMs?: number;
}

const CALL_TIMEOUT_MS = 60_000;

export async function reconcileCatalog(deps: CatalogReconcileDeps): Promise<ReconcileAction[]> {
  const actions: ReconcileAction[] = [];
  const grace = deps.graceMs ?? 10 * 60_000;
  const now = deps.clock.now().getTime();
  const record = (a: ReconcileAction) => {
    actions.push(a);
    deps.bus.publish({
      type: 'reconcile.action',
      worker_id: deps.workerId,
      data: { action: a.action, provider: a.provider, name: a.runtime_id ?? null },
    });
  };
  const mine = (w: string | null | undefined) => (w ?? deps.workerId) === deps.workerId;
  const snapshots = (await deps.store.listSnapshots()).filter((s) => mine(s.worker_id));
  const volumes = (await deps.store.listVolumes()).filter((v) => mine(v.worker_id));
  const old = (at: string | null) => at !== null && now - Date.parse(at) > grace;
  for (const [name, provider] of deps.providers) {
    await reconcileForkImages(deps, name, provider, old, record);
    if (!provider.listCatalog) continue;
    let held;
    try {
      held = await provider.listCatalog(AbortSignal.timeout(CALL_TIMEOUT_MS));
    } catch {
      continue; // backend down: judged on a later start
    }
    const snapNames = new Set(snapshots.filter((s) => s.provider === name).map((s) => s.name));
    const volNames = new Set(volumes.filter((v) => v.provider === name).map((v) => v.name));
    for (const s of held.snapshots) {
      if (snapNames.has(s.name) || !old(s.created_at)) continue;
      try {
        await provider.deleteSnapshot?.(s.name, s.image ?? '', AbortSignal.timeout(CALL_TIMEOUT_MS));
        record({ action: 'remove_orphan_snapshot', provider: name, runtime_id: s.name });
      } catch {
        // left for the next start
      }
    }
    for (const v of held.volumes) {
      if (volNames.has(v.name) || !old(v.created_at)) continue;
      try {
        await provider.deleteVolume?.(v.name, AbortSignal.timeout(CALL_TIMEOUT_MS));
        record({ action: 'remove_orphan_volume', provider: name, runtime_id: v.name });
      } catch {
        // in use, or the engine refused: left for the next start
      }
    }
    const heldSnaps = new Set(held.snapshots.map((s) => s.name));
    const heldVols = new Set(held.volumes.map((v) => v.name));
    for (const s of snapNames) if (!heldSnaps.has(s)) record({ action: 'snapshot_missing', provider: name, runtime_id: s });
    for (const v of volNames) if (!heldVols.has(v)) record({ action: 'volume_missing', provider: name, runtime_id: v });
  }
  return actions;
}

/** Fork images of `provider` that no sandbox still alive started from, older than the grace period: removed. */
async function reconcileForkImages(
  deps: CatalogReconcileDeps,
  name: string,
  provider: Provider,
  old: (at: string | null) => boolean,
  record: (a: ReconcileAction) => void,
): Promise<void> {
  if (!provider.listForkImages || !provider.deleteForkImage) return;
  let held;
  try {
    held = await provider.listForkImages(AbortSignal.timeout(CALL_TIMEOUT_MS));
  } catch {
    return; // backend down: judged on a later start
  }
  for (const f of held) {
    if (!old(f.created_at)) continue;
    const users = await deps.store.sandboxesOfFork(f.name);
    if (users.some((u) => u.state !== 'destroyed')) continue;
    try {
      await provider.deleteForkImage(f.name, AbortSignal.timeout(CALL_TIMEOUT_MS));
      record({ action: 'remove_orphan_fork_image', provider: name, runtime_id: f.name });
    } catch {
      // left for the next start
    }
  }
}
