/**
 * Events a worker reports about its own sandboxes (DESIGN.md §10): the denials of its egress
 * gateway, sent in batches to `POST /api/v1/worker/events`. An event about a sandbox the worker
 * does not run is dropped and counted: a worker speaks only for its own sandboxes.
 */
import type { EventBus } from '../events/bus.js';
import type { SandboxRecord, SandboxStore } from '../ports/index.js';

export interface WorkerDenial {
  type: 'network.denied';
  sandbox_id: string;
  host: string;
  port: number;
  reason: string;
}

export async function publishWorkerEvents(
  deps: { store: Pick<SandboxStore, 'getSandbox'>; bus: EventBus },
  workerId: string,
  events: readonly WorkerDenial[],
): Promise<{ accepted: number; rejected: number }> {
  const seen = new Map<string, SandboxRecord | null>();
  let accepted = 0;
  let rejected = 0;
  for (const e of events) {
    let rec = seen.get(e.sandbox_id);
    if (rec === undefined) {
      rec = await deps.store.getSandbox(e.sandbox_id);
      seen.set(e.sandbox_id, rec);
    }
    if (!rec || rec.worker_id !== workerId) {
      rejected++;
      continue;
    }
    const data = { sandbox_id: rec.id, host: e.host, port: e.port, reason: e.reason };
    deps.bus.publish({
      type: 'network.denied',
      sandbox_id: rec.id,
      ...(rec.owner_id ? { owner_id: rec.owner_id } : {}),
      worker_id: workerId,
      data,
    });
    accepted++;
  }
  return { accepted, rejected };
}
