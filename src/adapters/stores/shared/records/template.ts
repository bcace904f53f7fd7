/** Template rows. */
import type { EgressLists } from '../../../../core/network/rules.js';
import type { TemplateRecord, VolumeMount } from '../../../../core/ports/index.js';
import { egressText, volumesText } from './sandbox.js';
import { type Row, str, strOrNull, numOrNull, json } from './values.js';

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
