/**
 * Worker placement (DESIGN.md §7 "Placement"): a pure decision — the registry, the live counts and
 * the request in, the chosen worker (or why none) out. No store, no clock reads: callers pass both.
 */
import type { WorkerRecord } from '../ports/index.js';

/**
 * The capability a replica's local worker row carries (DESIGN §7): other replicas call it with
 * replica tokens, and no `sbx worker` may heartbeat, renew or report under such an id or claim it.
 */
export const REPLICA_CAPABILITY = 'replica';

/** A worker whose last heartbeat is older than this is stale and never placed on. */
export const PLACEMENT_STALE_AFTER_MS = 2 * 60_000;

export interface PlacementRequest {
  provider: string;
  owner_id: string | null;
  /** Only this worker may take it (it keeps the snapshot or volumes the spawn needs). */
  worker_id?: string;
  /** A capability the worker must advertise: `egress:<provider>` for a filtered spawn (DESIGN §10). */
  capability?: string;
}

export interface PlacementInput {
  /** The registry (the local worker's row included when it heartbeats). */
  workers: readonly WorkerRecord[];
  /** This node's worker id (`local`). */
  local_id: string;
  /** `server.local_worker`: may this node run sandboxes itself? */
  local_enabled: boolean;
  /** Providers configured on this node. */
  local_providers: readonly string[];
  /** Live sandboxes per worker id. */
  active: ReadonlyMap<string, number>;
  /** Live sandboxes of the request's owner per worker id (empty when the request has no owner). */
  active_for_owner: ReadonlyMap<string, number>;
  now: Date;
}

export type Placement = { ok: true; worker_id: string; local: boolean; eligible: number } | { ok: false; eligible: 0; reason: string };

/** Why one worker cannot take the request, or null when it can. */
export function ineligibility(w: WorkerRecord, req: PlacementRequest, input: PlacementInput): string | null {
  const isLocal = w.id === input.local_id;
  if (isLocal) {
    if (!input.local_enabled) return 'this node runs no sandboxes (server.local_worker: false)';
    if (!input.local_providers.includes(req.provider)) return `provider ${req.provider} is not configured on this node`;
    // This node's own limits are the global admission limits, checked before placement.
    return null;
  }
  if (w.status !== 'online') return `worker ${w.id} is ${w.status}`;
  const age = input.now.getTime() - Date.parse(w.last_heartbeat);
  if (!(age <= PLACEMENT_STALE_AFTER_MS)) return `worker ${w.id} is stale`;
  if (!w.providers.includes(req.provider)) return `worker ${w.id} does not run provider ${req.provider}`;
  const max = w.capacity.max_sandboxes;
  if (max > 0 && (input.active.get(w.id) ?? 0) >= max) return `worker ${w.id} is full`;
  const perOwner = w.capacity.max_sandboxes_per_owner;
  if (req.owner_id !== null && perOwner > 0 && (input.active_for_owner.get(w.id) ?? 0) >= perOwner)
    return `worker ${w.id} is full for this owner`;
  return null;
}

/**
 * Chooses the worker for a spawn: among the eligible, the one with the fewest live sandboxes; ties
 * go to this node, then by worker id. None eligible → `ok: false` with the reason the caller reports
 * as 503 `unavailable`.
 */
export function place(req: PlacementRequest, input: PlacementInput): Placement {
  const eligible = input.workers.filter((w) => ineligibility(w, req, input) === null);
  if (eligible.length === 0) return { ok: false, eligible: 0, reason: `no eligible worker for provider ${req.provider}` };
  const rank = (w: WorkerRecord) => input.active.get(w.id) ?? 0;
  const best = [...eligible].sort((a, b) => {
    const d = rank(a) - rank(b);
    if (d !== 0) return d;
    if (a.id === input.local_id) return -1;
    if (b.id === input.local_id) return 1;
    return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
  })[0]!;
  return { ok: true, worker_id: best.id, local: best.id === input.local_id, eligible: eligible.length };
}

/**
 * The provider a spawn without one goes to on a node that runs none itself (`server.local_worker:
 * false`): the configured default when it is a name, else (`auto`) docker, then proot, then any
 * other provider a fresh online worker advertises (sorted), else one any registered worker
 * advertises. Null when no worker advertises one.
 */
export function remoteDefaultProvider(configured: string, workers: readonly WorkerRecord[], now: Date, localId: string): string | null {
  if (configured !== 'auto' && configured !== 'none' && configured !== '') return configured;
  const pick = (usable: (w: WorkerRecord) => boolean): string | null => {
    const offered = new Set<string>();
    for (const w of workers) if (w.id !== localId && usable(w)) for (const p of w.providers) offered.add(p);
    for (const p of ['docker', 'proot']) if (offered.has(p)) return p;
    return [...offered].sort()[0] ?? null;
  };
  // What fresh online workers offer; else what any registered worker offers, so that placement
  // then says why none of them can take it (draining, stale, full).
  return pick((w) => w.status === 'online' && now.getTime() - Date.parse(w.last_heartbeat) <= PLACEMENT_STALE_AFTER_MS) ?? pick(() => true);
}

/**
 * The capabilities a worker advertises for one of its providers (`<capability>:<provider>` in its
 * heartbeat, e.g. `tty:docker`), without the provider suffix.
 */
export function providerCapabilities(w: Pick<WorkerRecord, 'capabilities'>, provider: string): string[] {
  const suffix = `:${provider}`;
  return w.capabilities.filter((c) => c.endsWith(suffix) && !c.startsWith('egress:')).map((c) => c.slice(0, -suffix.length));
}
