import { performance } from 'node:perf_hooks';
import { conflict } from '../../../core/errors.js';
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
  quotaFromRow,
  quotaValues,
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
import type { SqlDriver } from './driver.js';

/** The Store port, written once over a SqlDriver (SQLite or PostgreSQL). */
export class SqlStore implements Store {
  readonly driver: string;

  constructor(private readonly sql: SqlDriver) {
    this.driver = sql.name;
  }

  private async one(sql: string, params: unknown[] = []): Promise<Row | undefined> {
    return (await this.sql.rows(sql, params))[0];
  }

  migrate(): Promise<void> {
    return this.sql.migrate();
  }

  close(): Promise<void> {
    return this.sql.close();
  }

  async ping(): Promise<number> {
    const start = performance.now();
    await this.one('SELECT 1 AS ok');
    return performance.now() - start;
  }

  async getMeta(key: string): Promise<string | null> {
    const row = await this.one(SQL.getMeta, [key]);
    return row ? String(row.value) : null;
  }

  async setMeta(key: string, value: string): Promise<void> {
    await this.sql.count(SQL.setMeta, [key, value]);
  }

  async claimMeta(key: string, value: string): Promise<string> {
    await this.sql.count(SQL.claimMeta, [key, value]);
    // Rows are never deleted, so the row the insert found or made is still there.
    return String((await this.one(SQL.getMeta, [key]))!.value);
  }

  async insertSandbox(rec: SandboxRecord): Promise<void> {
    if ((await this.sql.count(SQL.insertSandbox, sandboxValues(rec))) === 0) {
      throw conflict(`sandbox "${rec.id}" already exists`);
    }
  }

  async updateSandbox(id: string, patch: Partial<Omit<SandboxRecord, 'id'>>): Promise<SandboxRecord | null> {
    const pairs = sandboxPatchPairs(patch);
    if (pairs.length === 0) return this.getSandbox(id);
    const q = updateSandboxQuery(id, pairs);
    const row = await this.one(q.sql, q.params);
    return row ? sandboxFromRow(row) : null;
  }

  async getSandbox(id: string): Promise<SandboxRecord | null> {
    const row = await this.one(SQL.getSandbox, [id]);
    return row ? sandboxFromRow(row) : null;
  }

  async listSandboxes(filter?: SandboxFilter): Promise<SandboxRecord[]> {
    const q = listSandboxesQuery(filter);
    return (await this.sql.rows(q.sql, q.params)).map(sandboxFromRow);
  }

  async createTemplate(rec: TemplateRecord): Promise<void> {
    if ((await this.sql.count(SQL.insertTemplate, templateValues(rec))) === 0) {
      throw conflict(`template "${rec.name}" already exists`);
    }
  }

  async getTemplate(name: string): Promise<TemplateRecord | null> {
    const row = await this.one(SQL.getTemplate, [name]);
    return row ? templateFromRow(row) : null;
  }

  async listTemplates(): Promise<TemplateRecord[]> {
    return (await this.sql.rows(SQL.listTemplates)).map(templateFromRow);
  }

  async updateTemplate(
    name: string,
    rec: Omit<TemplateRecord, 'name' | 'created_at'>,
  ): Promise<TemplateRecord | null> {
    const row = await this.one(SQL.updateTemplate, templateUpdateValues(name, rec));
    return row ? templateFromRow(row) : null;
  }

  async deleteTemplate(name: string): Promise<boolean> {
    return (await this.sql.count(SQL.deleteTemplate, [name])) > 0;
  }

  async upsertQuota(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): Promise<QuotaRecord> {
    return quotaFromRow((await this.one(SQL.upsertQuota, quotaValues(rec)))!);
  }

  async getQuota(ownerId: string): Promise<QuotaRecord | null> {
    const row = await this.one(SQL.getQuota, [ownerId]);
    return row ? quotaFromRow(row) : null;
  }

  async listQuotas(): Promise<QuotaRecord[]> {
    return (await this.sql.rows(SQL.listQuotas)).map(quotaFromRow);
  }

  async deleteQuota(ownerId: string): Promise<boolean> {
    return (await this.sql.count(SQL.deleteQuota, [ownerId])) > 0;
  }

  async upsertWorker(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): Promise<WorkerRecord> {
    return workerFromRow((await this.one(SQL.upsertWorker, workerValues(rec)))!);
  }

  async getWorker(id: string): Promise<WorkerRecord | null> {
    const row = await this.one(SQL.getWorker, [id]);
    return row ? workerFromRow(row) : null;
  }

  async listWorkers(): Promise<WorkerRecord[]> {
    return (await this.sql.rows(SQL.listWorkers)).map(workerFromRow);
  }

  async deleteWorker(id: string): Promise<boolean> {
    return (await this.sql.count(SQL.deleteWorker, [id])) > 0;
  }

  async acquireLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseRecord | null> {
    return this.sql.acquireLease(resourceId, holderId, leaseExpiry(now, ttlMs), now);
  }

  async renewLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseResult> {
    return this.sql.renewLease(resourceId, holderId, leaseExpiry(now, ttlMs), now);
  }

  async releaseLease(resourceId: string, holderId: string): Promise<boolean> {
    return (await this.sql.count(SQL.releaseLease, [resourceId, holderId])) > 0;
  }

  async getLease(resourceId: string): Promise<LeaseRecord | null> {
    const row = await this.one(SQL.getLease, [resourceId]);
    return row ? leaseFromRow(row) : null;
  }

  async listLeases(): Promise<LeaseRecord[]> {
    return (await this.sql.rows(SQL.listLeases)).map(leaseFromRow);
  }

  async insertAudit(rec: AuditRecord): Promise<void> {
    await this.sql.count(SQL.insertAudit, auditValues(rec));
  }

  async listAudit(filter?: AuditFilter): Promise<AuditRecord[]> {
    const q = listAuditQuery(filter);
    return (await this.sql.rows(q.sql, q.params)).map(auditFromRow);
  }

  async pruneAudit(before: Date): Promise<number> {
    return this.sql.count(SQL.pruneAudit, [before.toISOString()]);
  }
}
