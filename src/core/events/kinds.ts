/** Event kinds of spec Part 6. */
export const EVENT_KINDS = [
  'sandbox.created',
  'sandbox.running',
  'sandbox.destroyed',
  'sandbox.error',
  'exec.started',
  'exec.completed',
  'exec.failed',
  'exec.timeout',
  'file.written',
  'file.read',
  'operation.failed',
  'resource.limit',
  'provider.failed',
  'reconcile.action',
  'spawn.queued',
  'spawn.dequeued',
  'spawn.queue_timeout',
  'quota.saved',
  'quota.deleted',
  // sbx extensions
  'image.pull',
  'process.started',
  'process.ended',
  'snapshot.created',
  'snapshot.deleted',
  'volume.created',
  'volume.deleted',
  'network.denied',
  'sandbox.paused',
  'sandbox.resumed',
  'secret.created',
  'secret.updated',
  'secret.deleted',
] as const;

export type EventKind = (typeof EVENT_KINDS)[number];

/** Event JSON (DESIGN.md §3): `{id, type, timestamp, sandbox_id?, owner_id?, worker_id?, data?}`. */
export interface SbxEvent {
  id: number;
  type: EventKind;
  timestamp: string;
  sandbox_id?: string;
  owner_id?: string;
  worker_id?: string;
  data?: Record<string, unknown>;
}

export type EventInput = Omit<SbxEvent, 'id' | 'timestamp'>;
