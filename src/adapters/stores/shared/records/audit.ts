/** Admin audit rows. */
import type { AuditRecord } from '../../../../core/ports/index.js';
import { type Row, str, num } from './values.js';

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
