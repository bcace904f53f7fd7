/**
 * A replica's worker state (DESIGN.md §7 "Replicas that run sandboxes themselves"): a replica's
 * local worker keeps no file of its own, since the shared store already says which runtime serves
 * which of its sandboxes and which lease generation is the newest. Before a call is served, `load`
 * reads the sandbox's record and lease into memory; the synchronous WorkerState methods the RPC
 * server uses then answer from there. A record of another worker is never loaded, so a call can
 * only reach this replica's own runtimes.
 */
import type { EgressLists } from '../../../core/network/rules.js';
import type { LeaseStore, SandboxStore } from '../../../core/ports/index.js';
import type { WorkerRuntime, WorkerState } from '../../../core/scheduler/worker-state-port.js';

const LIVE = new Set(['running', 'paused', 'unhealthy', 'error']);
/** Entries kept in memory: every one can be read again from the store, so the oldest go first. */
const KEEP = 10_000;

function bounded<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > KEEP) map.delete(map.keys().next().value as string);
}

export interface ReplicaWorkerState extends WorkerState {
  /** Reads the sandbox's record and lease from the store before a call about it is served. */
  load(sandboxId: string): Promise<void>;
}

export function replicaWorkerState(store: SandboxStore & LeaseStore, workerId: string): ReplicaWorkerState {
  const runtimes = new Map<string, WorkerRuntime>();
  const generations = new Map<string, number>();
  const meta = new Map<string, string>();
  const observe = (id: string, generation: number) => {
    const seen = generations.get(id);
    if (seen !== undefined && generation < seen) return false;
    bounded(generations, id, generation);
    return true;
  };
  return {
    async load(sandboxId) {
      const [rec, lease] = await Promise.all([store.getSandbox(sandboxId), store.getLease(sandboxId)]);
      // Fencing against the store: a generation older than the stored lease's is a stale owner.
      if (lease && lease.holder_id === workerId) observe(sandboxId, lease.generation);
      // No record yet: a spawn this replica is serving for another (its caller stores the row after).
      if (!rec) return;
      if (rec.worker_id !== workerId || !rec.runtime_id || !LIVE.has(rec.state)) {
        runtimes.delete(sandboxId);
        return;
      }
      const known = runtimes.get(sandboxId);
      bounded(runtimes, sandboxId, {
        sandbox_id: rec.id,
        provider: rec.provider,
        runtime_id: rec.runtime_id,
        preview_token: known?.preview_token ?? null,
        network: rec.network === 'filtered' ? 'filtered' : null,
        egress: known?.egress ?? rec.egress ?? null,
      });
    },
    getMeta: (key) => meta.get(key) ?? null,
    setMeta: (key, value) => void meta.set(key, value),
    generation: (id) => generations.get(id) ?? null,
    observeGeneration: observe,
    putRuntime: (rt) => bounded(runtimes, rt.sandbox_id, { ...rt }),
    getRuntime: (id) => runtimes.get(id) ?? null,
    deleteRuntime: (id) => void runtimes.delete(id),
    setEgress(id, lists: EgressLists) {
      const rt = runtimes.get(id);
      if (!rt) return false;
      rt.egress = lists;
      return true;
    },
    listRuntimes: () => [...runtimes.values()].sort((a, b) => (a.sandbox_id < b.sandbox_id ? -1 : 1)),
    // A replica's RPC sets no worker capacity (admission caps its spawns in the shared store), so
    // this count of what is loaded only informs; it never refuses a spawn.
    countRuntimes: () => runtimes.size,
    close: () => {
      runtimes.clear();
      generations.clear();
    },
  };
}
