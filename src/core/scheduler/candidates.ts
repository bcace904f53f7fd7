/** Who may take a spawn (DESIGN.md §7 "Placement"): the filters the locator applies before `place()` decides. */
import { SbxError } from '../errors.js';
import type { WorkerRecord } from '../ports/index.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { PlacementRequest } from './placement.js';

/**
 * The candidates that can take a spawn needing `req.capability` (a filtered spawn: DESIGN §10):
 * this node when its provider enforces egress now, a worker when it advertises the capability.
 * None → 501 with why this node cannot (or that no worker can), before any runtime exists.
 */
export function capableCandidates(
  candidates: WorkerRecord[],
  req: PlacementRequest,
  providers: Pick<ProviderRegistry, 'has' | 'get'>,
  workerId: string,
): WorkerRecord[] {
  const cap = req.capability!;
  let localWhy: string | null = null;
  const out = candidates.filter((w) => {
    if (w.id !== workerId) return w.capabilities.includes(cap);
    if (!providers.has(req.provider)) return false;
    const egress = providers.get(req.provider).egress;
    const why = egress ? egress.unavailable() : null;
    if (!egress) localWhy = `network "filtered" needs a provider that enforces egress rules (docker); provider ${req.provider} cannot`;
    else if (why !== null) localWhy = `network "filtered" is not available here: ${why}`;
    return localWhy === null;
  });
  if (out.length > 0) return out;
  throw new SbxError(
    'not_implemented',
    localWhy ?? `network "filtered" is not available: no worker running provider ${req.provider} enforces egress rules`,
  );
}

/** This node as a candidate: it takes part by configuration, not by its registry row (heartbeats may lag a start). */
export function localWorkerRow(workerId: string, names: string[], now: Date): WorkerRecord {
  const at = now.toISOString();
  return {
    id: workerId,
    hostname: '',
    status: 'online',
    providers: names,
    capabilities: [],
    capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0 },
    last_heartbeat: at,
    created_at: at,
    updated_at: at,
  };
}
