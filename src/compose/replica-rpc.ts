/**
 * Replicas that run sandboxes themselves (DESIGN.md §7): each replica's local worker is registered
 * under its replica id with its worker RPC on the replica's own API listener (`/rpc`), so any
 * replica serves any sandbox by forwarding. Replicas call each other with `replica:rpc` tokens
 * signed by an installation key kept in the store; the RPC here accepts those and nothing else.
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { replicaWorkerState } from '../adapters/stores/worker-state/replica.js';
import { AUD_REPLICA_RPC } from '../core/auth/worker-claims.js';
import { badRequest } from '../core/errors.js';
import type { Clock, Store, WorkerRecord } from '../core/ports/index.js';
import type { ProviderRegistry } from '../core/providers/registry.js';
import type { Replicas } from '../core/replicas/replicas.js';
import { REPLICA_CAPABILITY } from '../core/scheduler/placement.js';
import { authenticateWorker } from '../transports/shared/worker-auth.js';
import { mountRpc } from '../transports/worker-rpc/server/app.js';

const NO_WORKER_CREDENTIALS = { shared_token: '', tokens: {}, signing_keys: [], revoked_token_ids: [] };
/** How long one answer about a peer replica's liveness serves placement. */
const LIVE_CACHE_MS = 1_000;

/** The installation key replica tokens are signed with: claimed once in the store, the same on every replica. */
export async function replicaRpcKey(store: Store): Promise<string> {
  return (await store.getMeta('replica_rpc_key')) || (await store.claimMeta('replica_rpc_key', randomBytes(32).toString('hex')));
}

/** True for a worker row that is a replica's local worker. */
export const isReplicaWorker = (w: WorkerRecord): boolean => w.capabilities.includes(REPLICA_CAPABILITY);

/**
 * Placement's view of a peer replica (DESIGN §7): its local worker takes spawns only while its
 * replica lease is live, so a replica killed with -9 leaves placement within one lease TTL, long
 * before its heartbeat goes stale. Other workers are judged by their heartbeat alone.
 */
export function peerLiveness(replicas: Replicas): (w: WorkerRecord) => Promise<boolean> {
  const seen = new Map<string, { at: number; live: Promise<boolean> }>();
  return (w) => {
    if (!isReplicaWorker(w)) return Promise.resolve(true);
    // Not listening yet (its port is picked by the system): nothing to call.
    if (!w.capacity.rpc_url) return Promise.resolve(false);
    const now = performance.now();
    const hit = seen.get(w.id);
    if (hit && now - hit.at < LIVE_CACHE_MS) return hit.live;
    const live = replicas.isLive(w.id).catch(() => false);
    seen.set(w.id, { at: now, live });
    return live;
  };
}

/**
 * Pool mode keeps its shared runtimes on one host (DESIGN §8): a replica refuses to start in pool
 * mode when a live replica on another host runs sandboxes on the same database.
 */
export async function refusePoolAcrossHosts(store: Store, replicas: Replicas, host: string): Promise<void> {
  for (const w of await store.listWorkers()) {
    if (!isReplicaWorker(w) || w.id === replicas.id || w.hostname === host) continue;
    if (await replicas.isLive(w.id))
      throw new Error(
        `pool mode across replicas on several hosts is not supported: replica ${w.id} runs on ${w.hostname}, ` +
          `this one on ${host}; run the pooled replicas on one host`,
      );
  }
}

export interface ReplicaRpcOptions {
  store: Store;
  providers: ProviderRegistry;
  workerId: string;
  installationKey: string;
  clock: Clock;
  logger: Logger;
  home: string;
  /** What a `worker.spawn` that names only `sandbox_id` gets (DESIGN §7): this node's defaults. */
  spawnDefaults: { provider: string; image: string; memory_mb: number; vcpus: number };
}

/** The route group that mounts this replica's worker RPC on its API app. */
export function replicaRpcRoutes(o: ReplicaRpcOptions): (app: FastifyInstance) => Promise<void> {
  const state = replicaWorkerState(o.store, o.workerId);
  return (app) =>
    mountRpc(app, {
      workerId: o.workerId,
      credentials: () => NO_WORKER_CREDENTIALS,
      authenticate: (headers) =>
        authenticateWorker(headers, { ...NO_WORKER_CREDENTIALS, signing_keys: [o.installationKey] }, AUD_REPLICA_RPC, o.clock.now()),
      prepare: (sandboxId) => state.load(sandboxId),
      providers: new Map(o.providers.all().map((p) => [p.name, p])),
      spawnDefaults: o.spawnDefaults,
      state,
      clock: o.clock,
      stagingDir: join(o.home, '.sbx', 'replica-staging', o.workerId.replace(/[^A-Za-z0-9_.-]/g, '_')),
      draining: () => false,
      drain: () => {
        throw badRequest('a replica cannot be drained over the RPC; stop its sbx serve instead');
      },
      log: o.logger,
      previewDomain: '',
    });
}
