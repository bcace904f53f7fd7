/** The audit history (a Store role). */

export interface AuditRecord {
  id: string;
  created_at: string;
  actor: string;
  method: string;
  path: string;
  status: number;
  duration_ms: number;
  request_id: string;
  remote_addr: string;
  user_agent: string;
}

export interface AuditFilter {
  limit?: number;
  /** Prefix match on the actor (`api-key` finds `api-key:dave`). */
  actor?: string;
  method?: string;
  status?: number;
  /** Prefix match on the path. */
  path?: string;
  since?: string;
  until?: string;
}

export interface AuditStore {
  insertAudit(rec: AuditRecord): Promise<void>;
  /** Newest first. */
  listAudit(filter?: AuditFilter): Promise<AuditRecord[]>;
  /** Deletes records created before `before`; returns how many. */
  pruneAudit(before: Date): Promise<number>;
}
