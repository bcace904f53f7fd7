/** Snapshot and volume rows (DESIGN.md §10). */
import type { SnapshotRecord, VolumeRecord } from '../../../../core/ports/index.js';
import { type Row, str, strOrNull, num } from './values.js';

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
