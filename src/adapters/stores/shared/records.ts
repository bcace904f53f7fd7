/**
 * Row <-> record mapping and lease rules shared by the SQLite and PostgreSQL adapters, so both
 * return byte-identical records: timestamps and JSON are stored as text and come back exactly
 * as inserted; numbers are normalized with Number() (pg returns BIGINT as a string).
 */
import { badRequest } from '../../../core/errors.js';
import type { EgressLists } from '../../../core/network/rules.js';
import type {
  AuditRecord,
  EgressCounts,
  LeaseRecord,
  LeaseResult,
  QuotaRecord,
  SandboxRecord,
  SandboxState,
  SnapshotRecord,
  TemplateRecord,
  VolumeMount,
  VolumeRecord,
  WorkerCapacity,
  WorkerRecord,
} from '../../../core/ports/index.js';

export type Row = Record<string, unknown>;

export const SANDBOX_COLUMNS = [
  'id',
  'state',
  'provider',
  'image',
  'memory_mb',
  'vcpus',
  'created_at',
  'updated_at',
  'expires_at',
  'metadata',
  'owner_id',
  'worker_id',
  'runtime_id',
  'template',
  'network',
  'volumes',
  'snapshot',
  'egress',
  'env',
  'access_token_seed',
  'forked_from',
  'fork',
  'auto_pause_ms',
  'on_expire',
  'pause_at',
  'ttl_ms',
] as const;

export const TEMPLATE_COLUMNS = [
  'name',
  'image',
  'memory_mb',
  'vcpus',
  'ttl',
  'provider',
  'metadata',
  'created_at',
  'updated_at',
  'network',
  'snapshot',
  'volumes',
  'warm',
  'egress',
  'secrets',
  'auto_pause',
  'on_expire',
] as const;

export const QUOTA_COLUMNS = ['owner_id', 'max_sandboxes', 'max_ttl_ms', 'max_exec_timeout_ms', 'created_at', 'updated_at'] as const;

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

export const LEASE_COLUMNS = ['resource_id', 'holder_id', 'generation', 'expires_at'] as const;

export const AUDIT_COLUMNS = [
  'id',
  'created_at',
  'actor',
  'method',
  'path',
  'status',
  'duration_ms',
  'request_id',
  'remote_addr',
  'user_agent',
] as const;

const str = (v: unknown): string => String(v);
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));
const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

function json<T>(v: unknown, fallback: T): T {
  if (typeof v !== 'string' || v === '') return fallback;
  return JSON.parse(v) as T;
}

/** Sandbox column values in SANDBOX_COLUMNS order. */
export function sandboxValues(rec: SandboxRecord): unknown[] {
  return SANDBOX_COLUMNS.map((c) => sandboxColumnValue(c, rec[c]));
}

/** Encodes one sandbox field for storage (metadata as JSON text). */
export function sandboxColumnValue(column: (typeof SANDBOX_COLUMNS)[number], value: unknown): unknown {
  if (column === 'metadata') return JSON.stringify(value ?? {});
  if (column === 'volumes') return volumesText(value as VolumeMount[] | null | undefined);
  if (column === 'egress') return egressText(value as EgressLists | null | undefined);
  if (column === 'env') return value && Object.keys(value as object).length > 0 ? JSON.stringify(value) : null;
  return value ?? null;
}

/** The patch as [column, stored value] pairs; `id` and undefined members are ignored. */
export function sandboxPatchPairs(patch: Partial<Omit<SandboxRecord, 'id'>>): Array<[string, unknown]> {
  const pairs: Array<[string, unknown]> = [];
  for (const column of SANDBOX_COLUMNS) {
    if (column === 'id') continue;
    const value = (patch as Record<string, unknown>)[column];
    if (value !== undefined) pairs.push([column, sandboxColumnValue(column, value)]);
  }
  return pairs;
}

export function sandboxFromRow(r: Row): SandboxRecord {
  return {
    id: str(r.id),
    state: str(r.state) as SandboxState,
    provider: str(r.provider),
    image: str(r.image),
    memory_mb: num(r.memory_mb),
    vcpus: num(r.vcpus),
    created_at: str(r.created_at),
    updated_at: str(r.updated_at),
    expires_at: str(r.expires_at),
    metadata: json<Record<string, string>>(r.metadata, {}),
    owner_id: strOrNull(r.owner_id),
    worker_id: str(r.worker_id),
    runtime_id: strOrNull(r.runtime_id),
    template: strOrNull(r.template),
    // Rows from before networks have none: the record then has no `network` at all.
    ...(r.network != null ? { network: str(r.network) } : {}),
    ...(r.volumes != null ? { volumes: json<VolumeMount[]>(r.volumes, []) } : {}),
    ...(r.snapshot != null ? { snapshot: str(r.snapshot) } : {}),
    ...(r.egress != null ? { egress: json<EgressLists>(r.egress, { allow: [], deny: [] }) } : {}),
    ...(r.env != null ? { env: json<Record<string, string>>(r.env, {}) } : {}),
    ...(r.access_token_seed != null ? { access_token_seed: str(r.access_token_seed) } : {}),
    ...(r.forked_from != null ? { forked_from: str(r.forked_from) } : {}),
    ...(r.fork != null ? { fork: str(r.fork) } : {}),
    ...(r.auto_pause_ms != null ? { auto_pause_ms: num(r.auto_pause_ms) } : {}),
    ...(r.on_expire != null ? { on_expire: str(r.on_expire) as 'destroy' | 'pause' } : {}),
    ...(r.pause_at != null ? { pause_at: str(r.pause_at) } : {}),
    ...(r.ttl_ms != null ? { ttl_ms: num(r.ttl_ms) } : {}),
  };
}

/** Egress lists as stored (DESIGN.md §10): compact JSON `{"allow":[…],"deny":[…]}`, null for none. */
export function egressText(e: EgressLists | null | undefined): string | null {
  if (!e) return null;
  return JSON.stringify({ allow: [...e.allow], deny: [...e.deny] });
}

/**
 * Volumes as stored: compact JSON `[{"name":…,"mount_path":…}]` in this key order (the store's
 * in-use query matches `"name":"<name>"` in it), null for none.
 */
export function volumesText(v: readonly VolumeMount[] | null | undefined): string | null {
  if (!v || v.length === 0) return null;
  return JSON.stringify(v.map((m) => ({ name: m.name, mount_path: m.mount_path })));
}

/** Template column values in TEMPLATE_COLUMNS order. */
export function templateValues(rec: TemplateRecord): unknown[] {
  return [
    rec.name,
    rec.image,
    rec.memory_mb,
    rec.vcpus,
    rec.ttl,
    rec.provider,
    JSON.stringify(rec.metadata ?? {}),
    rec.created_at,
    rec.updated_at,
    rec.network ?? null,
    rec.snapshot ?? null,
    volumesText(rec.volumes),
    rec.warm ?? null,
    egressText(rec.egress),
    rec.secrets?.length ? JSON.stringify(rec.secrets) : null,
    rec.auto_pause ?? null,
    rec.on_expire ?? null,
  ];
}

/** Parameters of SQL.updateTemplate. */
export function templateUpdateValues(name: string, rec: Omit<TemplateRecord, 'name' | 'created_at'>): unknown[] {
  return [
    rec.image,
    rec.memory_mb,
    rec.vcpus,
    rec.ttl,
    rec.provider,
    JSON.stringify(rec.metadata ?? {}),
    rec.network ?? null,
    rec.snapshot ?? null,
    volumesText(rec.volumes),
    rec.warm ?? null,
    egressText(rec.egress),
    rec.secrets?.length ? JSON.stringify(rec.secrets) : null,
    rec.auto_pause ?? null,
    rec.on_expire ?? null,
    rec.updated_at,
    name,
  ];
}

export function templateFromRow(r: Row): TemplateRecord {
  return {
    name: str(r.name),
    image: strOrNull(r.image),
    memory_mb: numOrNull(r.memory_mb),
    vcpus: numOrNull(r.vcpus),
    ttl: strOrNull(r.ttl),
    provider: strOrNull(r.provider),
    metadata: json<Record<string, string>>(r.metadata, {}),
    created_at: str(r.created_at),
    updated_at: str(r.updated_at),
    ...(r.network != null ? { network: str(r.network) } : {}),
    ...(r.snapshot != null ? { snapshot: str(r.snapshot) } : {}),
    ...(r.volumes != null ? { volumes: json<VolumeMount[]>(r.volumes, []) } : {}),
    ...(r.warm != null ? { warm: Number(r.warm) } : {}),
    ...(r.egress != null ? { egress: json<EgressLists>(r.egress, { allow: [], deny: [] }) } : {}),
    ...(r.secrets != null ? { secrets: json<string[]>(r.secrets, []) } : {}),
    ...(r.auto_pause != null ? { auto_pause: str(r.auto_pause) } : {}),
    ...(r.on_expire != null ? { on_expire: str(r.on_expire) as 'destroy' | 'pause' } : {}),
  };
}

export const SNAPSHOT_COLUMNS = [
  'name',
  'provider',
  'image',
  'kernel',
  'size_bytes',
  'created_at',
  'owner_id',
  'sandbox_id',
  'worker_id',
] as const;
export const VOLUME_COLUMNS = ['name', 'provider', 'created_at', 'owner_id', 'worker_id'] as const;

export function snapshotValues(rec: SnapshotRecord): unknown[] {
  return SNAPSHOT_COLUMNS.map((c) => rec[c] ?? null);
}

export function snapshotFromRow(r: Row): SnapshotRecord {
  return {
    name: str(r.name),
    provider: str(r.provider),
    image: str(r.image),
    kernel: strOrNull(r.kernel),
    size_bytes: num(r.size_bytes),
    created_at: str(r.created_at),
    owner_id: strOrNull(r.owner_id),
    sandbox_id: str(r.sandbox_id),
    worker_id: str(r.worker_id),
  };
}

export function volumeValues(rec: VolumeRecord): unknown[] {
  return VOLUME_COLUMNS.map((c) => rec[c] ?? null);
}

export function volumeFromRow(r: Row): VolumeRecord {
  return {
    name: str(r.name),
    provider: str(r.provider),
    created_at: str(r.created_at),
    owner_id: strOrNull(r.owner_id),
    ...(r.worker_id != null ? { worker_id: str(r.worker_id) } : {}),
  };
}

/** Quota column values in QUOTA_COLUMNS order; a new row without created_at starts at updated_at. */
export function quotaValues(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): unknown[] {
  return [rec.owner_id, rec.max_sandboxes, rec.max_ttl_ms, rec.max_exec_timeout_ms, rec.created_at ?? rec.updated_at, rec.updated_at];
}

export function quotaFromRow(r: Row): QuotaRecord {
  return {
    owner_id: str(r.owner_id),
    max_sandboxes: num(r.max_sandboxes),
    max_ttl_ms: num(r.max_ttl_ms),
    max_exec_timeout_ms: num(r.max_exec_timeout_ms),
    created_at: str(r.created_at),
    updated_at: str(r.updated_at),
  };
}

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
  return ok ? { capacity, egress: { allowed: egress.allowed, denied: egress.denied } } : { capacity };
}

export function leaseFromRow(r: Row): LeaseRecord {
  return {
    resource_id: str(r.resource_id),
    holder_id: str(r.holder_id),
    generation: num(r.generation),
    expires_at: str(r.expires_at),
  };
}

/** Audit column values in AUDIT_COLUMNS order. */
export function auditValues(rec: AuditRecord): unknown[] {
  return AUDIT_COLUMNS.map((c) => rec[c]);
}

export function auditFromRow(r: Row): AuditRecord {
  return {
    id: str(r.id),
    created_at: str(r.created_at),
    actor: str(r.actor),
    method: str(r.method),
    path: str(r.path),
    status: num(r.status),
    duration_ms: num(r.duration_ms),
    request_id: str(r.request_id),
    remote_addr: str(r.remote_addr),
    user_agent: str(r.user_agent),
  };
}

// ---------------------------------------------------------------- leases (spec 3.3)

function checkNow(now: Date): number {
  const t = now.getTime();
  if (!Number.isFinite(t)) throw badRequest('lease time is not a valid date');
  return t;
}

/** Validates a lease TTL and returns the expiry for a lease taken at `now`. */
export function leaseExpiry(now: Date, ttlMs: number): string {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw badRequest('lease ttl must be a positive number of milliseconds');
  return new Date(checkNow(now) + Math.floor(ttlMs)).toISOString();
}

/** A lease is expired from its `expires_at` instant on. */
export function leaseExpired(lease: LeaseRecord, now: Date): boolean {
  return Date.parse(lease.expires_at) <= checkNow(now);
}

/** Acquire succeeds with no lease, an expired lease, or the same holder. */
export function mayAcquire(current: LeaseRecord | null, holderId: string, now: Date): boolean {
  return current === null || current.holder_id === holderId || leaseExpired(current, now);
}

/** Renew succeeds only for the current holder before expiry; otherwise says why not. */
export function renewRefusal(
  current: LeaseRecord | null,
  holderId: string,
  now: Date,
): Extract<LeaseResult, { ok: false }>['reason'] | null {
  if (current === null) return 'not_found';
  if (current.holder_id !== holderId) return 'held_by_other';
  if (leaseExpired(current, now)) return 'expired';
  return null;
}
