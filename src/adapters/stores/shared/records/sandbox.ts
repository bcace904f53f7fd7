/** Sandbox rows: columns, values, patches and the record back. */
import type { EgressLists } from '../../../../core/network/rules.js';
import type { SandboxRecord, SandboxState, VolumeMount } from '../../../../core/ports/index.js';
import { type Row, str, strOrNull, num, json } from './values.js';

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
