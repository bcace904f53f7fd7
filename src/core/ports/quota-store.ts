/** Owner quotas (a Store role). */

export interface QuotaRecord {
  owner_id: string;
  max_sandboxes: number;
  /** Milliseconds; 0 = inherit the global default. */
  max_ttl_ms: number;
  /** Milliseconds; 0 = inherit the global default. */
  max_exec_timeout_ms: number;
  created_at: string;
  updated_at: string;
}

export interface QuotaStore {
  /** Insert or update; keeps created_at of an existing row. Returns the stored row. */
  upsertQuota(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): Promise<QuotaRecord>;
  getQuota(ownerId: string): Promise<QuotaRecord | null>;
  /** Sorted by owner_id. */
  listQuotas(): Promise<QuotaRecord[]>;
  deleteQuota(ownerId: string): Promise<boolean>;
}
