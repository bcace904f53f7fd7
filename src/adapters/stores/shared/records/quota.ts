/** Owner quota rows. */
import type { QuotaRecord } from '../../../../core/ports/index.js';
import { type Row, str, num } from './values.js';

export const QUOTA_COLUMNS = ['owner_id', 'max_sandboxes', 'max_ttl_ms', 'max_exec_timeout_ms', 'created_at', 'updated_at'] as const;

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
