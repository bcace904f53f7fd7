import { performance } from 'node:perf_hooks';
import type { Pool, PoolClient } from 'pg';
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
import { storeError } from './errors.js';
import { LATEST_VERSION, applyMigrations } from './migrations.js';

// One statement: the unique index serializes concurrent inserts, ON CONFLICT locks the existing
// row and re-checks the WHERE against its latest version, so exactly one contender wins.
const ACQUIRE_LEASE = `INSERT INTO leases (resource_id, holder_id, generation, expires_at) VALUES ($1, $2, 1, $3)
  ON CONFLICT (resource_id) DO UPDATE SET holder_id = excluded.holder_id, generation = leases.generation + 1,
  expires_at = excluded.expires_at
  WHERE leases.holder_id = excluded.holder_id OR leases.expires_at::timestamptz <= $4::timestamptz
  RETURNING resource_id, holder_id, generation, expires_at`;

const LOCK_LEASE = 'SELECT resource_id, holder_id, generation, expires_at FROM leases WHERE resource_id = $1 FOR UPDATE';

const numbered = new Map<string, string>();

/** Rewrites `?` placeholders as `$1…$n` (our SQL has no `?` inside literals). */
function pgSql(sql: string): string {
  let out = numbered.get(sql);
  if (out === undefined) {
    let n = 0;
    out = sql.replace(/\?/g, () => `$${++n}`);
    numbered.set(sql, out);
  }
  return out;
}

type Queryable = Pick<PoolClient, 'query'>;

/** The Store port over a pg Pool; every driver error leaves as a redacted SbxError. */
export class PostgresStore implements Store {
  readonly driver = 'postgres';
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly schema: string | null,
    private readonly redact: (text: string) => string,
  ) {}

  private async rows(sql: string, params: unknown[] = [], on: Queryable = this.pool): Promise<Row[]> {
    return (await this.exec(sql, params, on)).rows;
  }

  private async one(sql: string, params: unknown[] = [], on: Queryable = this.pool): Promise<Row | undefined> {
    return (await this.exec(sql, params, on)).rows[0];
  }

  private async count(sql: string, params: unknown[] = []): Promise<number> {
    return (await this.exec(sql, params, this.pool)).rowCount ?? 0;
  }

  private async exec(sql: string, params: unknown[], on: Queryable): Promise<{ rows: Row[]; rowCount: number | null }> {
    if (this.closed) throw unavailable('postgres store is closed');
    try {
      return await on.query<Row>(pgSql(sql), params);
    } catch (err) {
      throw storeError(err, this.redact);
    }
  }

  private async transaction<T>(fn: (client: PoolClient) => Promise<T>): Promise<T> {
    if (this.closed) throw unavailable('postgres store is closed');
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw storeError(err, this.redact);
    }
    try {
      await this.exec('BEGIN', [], client);
      const result = await fn(client);
      await this.exec('COMMIT', [], client);
      client.release();
      return result;
    } catch (err) {
      const rolledBack = await client.query('ROLLBACK').then(() => true, () => false);
      // A connection that could not roll back is broken: destroy it instead of pooling it.
      client.release(rolledBack ? undefined : true);
      throw storeError(err, this.redact);
    }
  }

  async migrate(): Promise<void> {
    if (this.closed) throw unavailable('postgres store is closed');
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch (err) {
      throw storeError(err, this.redact);
    }
    try {
      await applyMigrations(client, this.schema);
    } catch (err) {
      throw storeError(err, this.redact, 'postgres store migration');
    } finally {
      client.release();
    }
    await this.setMeta('schema_version', String(LATEST_VERSION));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
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
    await this.count(SQL.setMeta, [key, value]);
  }

  async claimMeta(key: string, value: string): Promise<string> {
    await this.count(SQL.claimMeta, [key, value]);
    // Rows are never deleted, so the row the insert found or made is still there.
    return String((await this.one(SQL.getMeta, [key]))!.value);
  }

  async insertSandbox(rec: SandboxRecord): Promise<void> {
    if ((await this.count(SQL.insertSandbox, sandboxValues(rec))) === 0) {
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
    return (await this.rows(q.sql, q.params)).map(sandboxFromRow);
  }

  async createTemplate(rec: TemplateRecord): Promise<void> {
    if ((await this.count(SQL.insertTemplate, templateValues(rec))) === 0) {
      throw conflict(`template "${rec.name}" already exists`);
    }
  }

  async getTemplate(name: string): Promise<TemplateRecord | null> {
    const row = await this.one(SQL.getTemplate, [name]);
    return row ? templateFromRow(row) : null;
  }

  async listTemplates(): Promise<TemplateRecord[]> {
    return (await this.rows(SQL.listTemplates)).map(templateFromRow);
  }

  async updateTemplate(
    name: string,
    rec: Omit<TemplateRecord, 'name' | 'created_at'>,
  ): Promise<TemplateRecord | null> {
    const row = await this.one(SQL.updateTemplate, templateUpdateValues(name, rec));
    return row ? templateFromRow(row) : null;
  }

  async deleteTemplate(name: string): Promise<boolean> {
    return (await this.count(SQL.deleteTemplate, [name])) > 0;
  }

  async upsertQuota(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): Promise<QuotaRecord> {
    return quotaFromRow((await this.one(SQL.upsertQuota, quotaValues(rec)))!);
  }

  async getQuota(ownerId: string): Promise<QuotaRecord | null> {
    const row = await this.one(SQL.getQuota, [ownerId]);
    return row ? quotaFromRow(row) : null;
  }

  async listQuotas(): Promise<QuotaRecord[]> {
    return (await this.rows(SQL.listQuotas)).map(quotaFromRow);
  }

  async deleteQuota(ownerId: string): Promise<boolean> {
    return (await this.count(SQL.deleteQuota, [ownerId])) > 0;
  }

  async upsertWorker(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): Promise<WorkerRecord> {
    return workerFromRow((await this.one(SQL.upsertWorker, workerValues(rec)))!);
  }

  async getWorker(id: string): Promise<WorkerRecord | null> {
    const row = await this.one(SQL.getWorker, [id]);
    return row ? workerFromRow(row) : null;
  }

  async listWorkers(): Promise<WorkerRecord[]> {
    return (await this.rows(SQL.listWorkers)).map(workerFromRow);
  }

  async deleteWorker(id: string): Promise<boolean> {
    return (await this.count(SQL.deleteWorker, [id])) > 0;
  }

  async acquireLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseRecord | null> {
    const expiresAt = leaseExpiry(now, ttlMs);
    const row = await this.one(ACQUIRE_LEASE, [resourceId, holderId, expiresAt, now.toISOString()]);
    return row ? leaseFromRow(row) : null;
  }

  async renewLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseResult> {
    const expiresAt = leaseExpiry(now, ttlMs);
    return this.transaction(async (client): Promise<LeaseResult> => {
      const current = await this.one(LOCK_LEASE, [resourceId], client);
      const reason = renewRefusal(current ? leaseFromRow(current) : null, holderId, now);
      if (reason) return { ok: false, reason };
      const row = await this.one(SQL.renewLease, [expiresAt, resourceId, holderId], client);
      return { ok: true, lease: leaseFromRow(row!) };
    });
  }

  async releaseLease(resourceId: string, holderId: string): Promise<boolean> {
    return (await this.count(SQL.releaseLease, [resourceId, holderId])) > 0;
  }

  async getLease(resourceId: string): Promise<LeaseRecord | null> {
    const row = await this.one(SQL.getLease, [resourceId]);
    return row ? leaseFromRow(row) : null;
  }

  async listLeases(): Promise<LeaseRecord[]> {
    return (await this.rows(SQL.listLeases)).map(leaseFromRow);
  }

  async insertAudit(rec: AuditRecord): Promise<void> {
    await this.count(SQL.insertAudit, auditValues(rec));
  }

  async listAudit(filter?: AuditFilter): Promise<AuditRecord[]> {
    const q = listAuditQuery(filter);
    return (await this.rows(q.sql, q.params)).map(auditFromRow);
  }

  async pruneAudit(before: Date): Promise<number> {
    return this.count(SQL.pruneAudit, [before.toISOString()]);
  }
}
