import type { AuditFilter, AuditRecord, Store } from '../ports/index.js';

/** Admin audit history (DESIGN.md §3): the one writer records, admins query. */
export class AuditService {
  constructor(private readonly store: Pick<Store, 'insertAudit' | 'listAudit'>) {}

  record(rec: AuditRecord): Promise<void> {
    return this.store.insertAudit(rec);
  }

  /** Matching records, newest first. */
  list(filter?: AuditFilter): Promise<AuditRecord[]> {
    return this.store.listAudit(filter);
  }
}
