/** Worker rows: capacity and egress counts in one JSON column. */
import type { EgressCounts, WorkerCapacity, WorkerRecord } from '../../../../core/ports/index.js';
import { type Row, str, json } from './values.js';

export const WORKER_COLUMNS = [
  'id',
  'hostname',
  'status',
  'providers',
  'capabilities',
  'capacity',
  'last_heartbeat',
  'created_at',
  'updated_at',
] as const;

/** Worker column values in WORKER_COLUMNS order; a new row without created_at starts at updated_at. */
export function workerValues(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): unknown[] {
  return [
    rec.id,
    rec.hostname,
    rec.status,
    JSON.stringify(rec.providers ?? []),
    JSON.stringify(rec.capabilities ?? []),
    // The egress counters ride in the capacity column (JSON): no schema change for a telemetry pair.
    JSON.stringify({ ...(rec.capacity ?? {}), ...(rec.egress ? { egress: rec.egress } : {}) }),
    rec.last_heartbeat,
    rec.created_at ?? rec.updated_at,
    rec.updated_at,
  ];
}

export function workerFromRow(r: Row): WorkerRecord {
  return {
    id: str(r.id),
    hostname: str(r.hostname),
    status: str(r.status),
    providers: json<string[]>(r.providers, []),
    capabilities: json<string[]>(r.capabilities, []),
    ...capacityAndEgress(json<WorkerCapacity & { egress?: EgressCounts }>(r.capacity, { max_sandboxes: 0, max_sandboxes_per_owner: 0 })),
    last_heartbeat: str(r.last_heartbeat),
    created_at: str(r.created_at),
    updated_at: str(r.updated_at),
  };
}

function capacityAndEgress(stored: WorkerCapacity & { egress?: EgressCounts }): Pick<WorkerRecord, 'capacity' | 'egress'> {
  const { egress, ...capacity } = stored;
  const ok = egress && Number.isSafeInteger(egress.allowed) && Number.isSafeInteger(egress.denied);
  if (!ok) return { capacity };
  const injections = Number.isSafeInteger(egress.injections) ? { injections: egress.injections } : {};
  return { capacity, egress: { allowed: egress.allowed, denied: egress.denied, ...injections } };
}
