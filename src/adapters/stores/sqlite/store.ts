import { performance } from 'node:perf_hooks';
import type Database from 'better-sqlite3';
import { conflict, unavailable } from '../../../core/errors.js';
import type {
  AuditFilter,
  AuditRecord,
  LeaseRecord,
  LeaseResult,
  QuotaRecord,
  SandboxFilter,
  SandboxRecord,
  Store,
  TemplateRecord,
  WorkerRecord,
} from '../../../core/ports.js';
import { SQL, listAuditQuery, listSandboxesQuery, updateSandboxQuery } from '../shared/queries.js';
import {
  auditFromRow,
  auditValues,
  leaseExpiry,
  leaseFromRow,
  mayAcquire,
  quotaFromRow,
  quotaValues,
  renewRefusal,
  sandboxFromRow,
  sandboxPatchPairs,
  sandboxValues,
  templateFromRow,
  templateUpdateValues,
  templateValues,
  workerFromRow,
  workerValues,
  type Row,
} from '../shared/records.js';
import { LATEST_VERSION, applyMigrations } from './migrations.js';

const UPSERT_LEASE = `INSERT INTO leases (resource_id, holder_id, generation, expires_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (resource_id) DO UPDATE SET holder_id = excluded.holder_id, generation = excluded.generation,
  expires_at = excluded.expires_at`;

/**
 * The Store port over one better-sqlite3 connection. The driver is synchronous, so every method
 * finishes its SQL before yielding; multi-statement work runs in IMMEDIATE transactions, which
 * also serialize against other processes sharing the file.
 */
export class SqliteStore implements Store {
  readonly driver = 'sqlite';
  private readonly statements = new Map<string, Database.Statement>();
  private closed = false;

  constructor(private readonly db: Database.Database) {}

  private stmt(sql: string): Database.Statement {
    if (this.closed) throw unavailable('sqlite store is closed');
    let s = this.statements.get(sql);
    if (!s) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  private all(sql: string, params: unknown[] = []): Row[] {
    return this.stmt(sql).all(...params) as Row[];
  }

  private one(sql: string, params: unknown[] = []): Row | undefined {
    return this.stmt(sql).get(...params) as Row | undefined;
  }

  private run(sql: string, params: unknown[] = []): number {
    return this.stmt(sql).run(...params).changes;
  }

  async migrate(): Promise<void> {
    if (this.closed) throw unavailable('sqlite store is closed');
    applyMigrations(this.db, () => new Date().toISOString());
    this.run(SQL.setMeta, ['schema_version', String(LATEST_VERSION)]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.statements.clear();
    this.db.close();
  }

  async ping(): Promise<number> {
    const start = performance.now();
    this.one('SELECT 1 AS ok');
    return performance.now() - start;
  }

  async getMeta(key: string): Promise<string | null> {
    const row = this.one(SQL.getMeta, [key]);
    return row ? String(row.value) : null;
  }

  async setMeta(key: string, value: string): Promise<void> {
    this.run(SQL.setMeta, [key, value]);
  }

  async claimMeta(key: string, value: string): Promise<string> {
    this.run(SQL.claimMeta, [key, value]);
    return String(this.one(SQL.getMeta, [key])!.value);
  }

  async insertSandbox(rec: SandboxRecord): Promise<void> {
    if (this.run(SQL.insertSandbox, sandboxValues(rec)) === 0) throw conflict(`sandbox "${rec.id}" already exists`);
  }

  async updateSandbox(id: string, patch: Partial<Omit<SandboxRecord, 'id'>>): Promise<SandboxRecord | null> {
    const pairs = sandboxPatchPairs(patch);
    if (pairs.length === 0) return this.getSandbox(id);
    const q = updateSandboxQuery(id, pairs);
    const row = this.one(q.sql, q.params);
    return row ? sandboxFromRow(row) : null;
  }

  async getSandbox(id: string): Promise<SandboxRecord | null> {
    const row = this.one(SQL.getSandbox, [id]);
    return row ? sandboxFromRow(row) : null;
  }

  async listSandboxes(filter?: SandboxFilter): Promise<SandboxRecord[]> {
    const q = listSandboxesQuery(filter);
    return this.all(q.sql, q.params).map(sandboxFromRow);
  }

  async createTemplate(rec: TemplateRecord): Promise<void> {
    if (this.run(SQL.insertTemplate, templateValues(rec)) === 0) {
      throw conflict(`template "${rec.name}" already exists`);
    }
  }

  async getTemplate(name: string): Promise<TemplateRecord | null> {
    const row = this.one(SQL.getTemplate, [name]);
    return row ? templateFromRow(row) : null;
  }

  async listTemplates(): Promise<TemplateRecord[]> {
    return this.all(SQL.listTemplates).map(templateFromRow);
  }

  async updateTemplate(
    name: string,
    rec: Omit<TemplateRecord, 'name' | 'created_at'>,
  ): Promise<TemplateRecord | null> {
    const row = this.one(SQL.updateTemplate, templateUpdateValues(name, rec));
    return row ? templateFromRow(row) : null;
  }

  async deleteTemplate(name: string): Promise<boolean> {
    return this.run(SQL.deleteTemplate, [name]) > 0;
  }

  async upsertQuota(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): Promise<QuotaRecord> {
    return quotaFromRow(this.one(SQL.upsertQuota, quotaValues(rec))!);
  }

  async getQuota(ownerId: string): Promise<QuotaRecord | null> {
    const row = this.one(SQL.getQuota, [ownerId]);
    return row ? quotaFromRow(row) : null;
  }

  async listQuotas(): Promise<QuotaRecord[]> {
    return this.all(SQL.listQuotas).map(quotaFromRow);
  }

  async deleteQuota(ownerId: string): Promise<boolean> {
    return this.run(SQL.deleteQuota, [ownerId]) > 0;
  }

  async upsertWorker(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): Promise<WorkerRecord> {
    return workerFromRow(this.one(SQL.upsertWorker, workerValues(rec))!);
  }

  async getWorker(id: string): Promise<WorkerRecord | null> {
    const row = this.one(SQL.getWorker, [id]);
    return row ? workerFromRow(row) : null;
  }

  async listWorkers(): Promise<WorkerRecord[]> {
    return this.all(SQL.listWorkers).map(workerFromRow);
  }

  async deleteWorker(id: string): Promise<boolean> {
    return this.run(SQL.deleteWorker, [id]) > 0;
  }

  private currentLease(resourceId: string): LeaseRecord | null {
    const row = this.one(SQL.getLease, [resourceId]);
    return row ? leaseFromRow(row) : null;
  }

  async acquireLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseRecord | null> {
    const expiresAt = leaseExpiry(now, ttlMs);
    const acquire = this.db.transaction((): LeaseRecord | null => {
      const current = this.currentLease(resourceId);
      if (!mayAcquire(current, holderId, now)) return null;
      const lease: LeaseRecord = {
        resource_id: resourceId,
        holder_id: holderId,
        generation: (current?.generation ?? 0) + 1,
        expires_at: expiresAt,
      };
      this.run(UPSERT_LEASE, [lease.resource_id, lease.holder_id, lease.generation, lease.expires_at]);
      return lease;
    });
    return acquire.immediate();
  }

  async renewLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseResult> {
    const expiresAt = leaseExpiry(now, ttlMs);
    const renew = this.db.transaction((): LeaseResult => {
      const reason = renewRefusal(this.currentLease(resourceId), holderId, now);
      if (reason) return { ok: false, reason };
      const row = this.one(SQL.renewLease, [expiresAt, resourceId, holderId])!;
      return { ok: true, lease: leaseFromRow(row) };
    });
    return renew.immediate();
  }

  async releaseLease(resourceId: string, holderId: string): Promise<boolean> {
    return this.run(SQL.releaseLease, [resourceId, holderId]) > 0;
  }

  async getLease(resourceId: string): Promise<LeaseRecord | null> {
    return this.currentLease(resourceId);
  }

  async listLeases(): Promise<LeaseRecord[]> {
    return this.all(SQL.listLeases).map(leaseFromRow);
  }

  async insertAudit(rec: AuditRecord): Promise<void> {
    this.run(SQL.insertAudit, auditValues(rec));
  }

  async listAudit(filter?: AuditFilter): Promise<AuditRecord[]> {
    const q = listAuditQuery(filter);
    return this.all(q.sql, q.params).map(auditFromRow);
  }

  async pruneAudit(before: Date): Promise<number> {
    return this.run(SQL.pruneAudit, [before.toISOString()]);
  }
}
