import { performance } from 'node:perf_hooks';
import { conflict } from '../../../core/errors.js';
import type {
  AuditFilter,
  AuditRecord,
  SecretBinding,
  SecretRecord,
  SecretStore,
  IdempotencyRecord,
  LeaseRecord,
  LeaseResult,
  LiveCounts,
  ProcessFilter,
  ProcessRecord,
  WarmRecord,
  SandboxTally,
  QuotaRecord,
  SandboxFilter,
  SandboxRecord,
  SnapshotRecord,
  Store,
  VolumeRecord,
  TemplateRecord,
  WorkerRecord,
} from '../../../core/ports/index.js';
import {
  TALLY_SANDBOXES,
  COUNT_LIVE,
  countLiveParams,
  COUNT_LIVE_BY_WORKER,
  COUNT_LIVE_BY_WORKER_FOR_OWNER,
  COUNT_OF_PROVIDER,
  countLiveByOwnerQuery,
  SQL,
  listAuditQuery,
  listSandboxesQuery,
  updateSandboxQuery,
} from '../shared/queries.js';
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
  snapshotFromRow,
  snapshotValues,
  volumeFromRow,
  volumeValues,
  templateFromRow,
  templateUpdateValues,
  templateValues,
  workerFromRow,
  workerValues,
  type Row,
} from '../shared/records.js';
import type { SqlDriver } from './driver.js';
import { SqlProcesses } from './processes.js';
import { SqlWarm } from './warm.js';
import { SqlSecrets } from './secrets.js';

/** The Store port, written once over a SqlDriver (SQLite or PostgreSQL). */
export class SqlStore implements Store {
  readonly driver: string;

  private readonly processes: SqlProcesses;
  private readonly warm: SqlWarm;
  private readonly secrets: SqlSecrets;

  constructor(private readonly sql: SqlDriver) {
    this.driver = sql.name;
    this.processes = new SqlProcesses(sql);
    this.warm = new SqlWarm(sql);
    this.secrets = new SqlSecrets(sql);
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

  async countLive(now: string, owners: readonly string[]): Promise<LiveCounts> {
    const row = await this.one(COUNT_LIVE, countLiveParams(now));
    const by_owner: Record<string, number> = {};
    const wanted = [...new Set(owners)];
    if (wanted.length > 0) {
      const q = countLiveByOwnerQuery(now, wanted);
      for (const r of await this.sql.rows(q.sql, q.params)) if (Number(r.n) > 0) by_owner[String(r.owner_id)] = Number(r.n);
    }
    return { total: Number(row?.n ?? 0), next_expiry: row?.next_expiry == null ? null : String(row.next_expiry), by_owner };
  }

  async tallySandboxes(now: string): Promise<SandboxTally[]> {
    return (await this.sql.rows(TALLY_SANDBOXES, [now])).map((r) => ({
      state: String(r.state) as SandboxTally['state'],
      provider: String(r.provider),
      worker_id: String(r.worker_id),
      past_ttl: Number(r.past_ttl) === 1,
      n: Number(r.n),
    }));
  }

  async countLiveByWorker(
    now: string,
    owner: string | null,
  ): Promise<{ by_worker: Record<string, number>; by_worker_for_owner: Record<string, number> }> {
    const tally = (rows: Row[]) => Object.fromEntries(rows.filter((r) => Number(r.n) > 0).map((r) => [String(r.worker_id), Number(r.n)]));
    const by_worker = tally(await this.sql.rows(COUNT_LIVE_BY_WORKER, [now]));
    const by_worker_for_owner = owner === null ? {} : tally(await this.sql.rows(COUNT_LIVE_BY_WORKER_FOR_OWNER, [now, owner, owner]));
    return { by_worker, by_worker_for_owner };
  }

  async countOfProvider(now: string, provider: string): Promise<number> {
    return Number((await this.one(COUNT_OF_PROVIDER, [provider, now]))?.n ?? 0);
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

  async updateTemplate(name: string, rec: Omit<TemplateRecord, 'name' | 'created_at'>): Promise<TemplateRecord | null> {
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

  async claimIdempotency(rec: Omit<IdempotencyRecord, 'sandbox_id'>): Promise<boolean> {
    return (await this.sql.count(SQL.claimIdempotency, [rec.owner_key, rec.key, rec.request_hash, rec.created_at])) > 0;
  }

  async getIdempotency(ownerKey: string, key: string): Promise<IdempotencyRecord | null> {
    const r = await this.one(SQL.getIdempotency, [ownerKey, key]);
    if (!r) return null;
    return {
      owner_key: String(r.owner_key),
      key: String(r.key),
      request_hash: String(r.request_hash),
      sandbox_id: r.sandbox_id == null ? null : String(r.sandbox_id),
      created_at: String(r.created_at),
    };
  }

  async completeIdempotency(ownerKey: string, key: string, createdAt: string, sandboxId: string): Promise<void> {
    await this.sql.count(SQL.completeIdempotency, [sandboxId, ownerKey, key, createdAt]);
  }

  async dropIdempotency(ownerKey: string, key: string, createdAt: string, pendingOnly: boolean): Promise<boolean> {
    return (await this.sql.count(pendingOnly ? SQL.dropIdempotency : SQL.dropIdempotencyAt, [ownerKey, key, createdAt])) > 0;
  }

  async pruneIdempotency(before: string): Promise<number> {
    return this.sql.count(SQL.pruneIdempotency, [before]);
  }

  async insertSnapshot(rec: SnapshotRecord): Promise<void> {
    if ((await this.sql.count(SQL.insertSnapshot, snapshotValues(rec))) === 0) throw conflict(`snapshot "${rec.name}" already exists`);
  }

  async getSnapshot(name: string): Promise<SnapshotRecord | null> {
    const row = await this.one(SQL.getSnapshot, [name]);
    return row ? snapshotFromRow(row) : null;
  }

  async listSnapshots(): Promise<SnapshotRecord[]> {
    return (await this.sql.rows(SQL.listSnapshots)).map(snapshotFromRow);
  }

  async deleteSnapshot(name: string): Promise<boolean> {
    return (await this.sql.count(SQL.deleteSnapshot, [name])) > 0;
  }

  async insertVolume(rec: VolumeRecord): Promise<void> {
    if ((await this.sql.count(SQL.insertVolume, volumeValues(rec))) === 0) throw conflict(`volume "${rec.name}" already exists`);
  }

  async getVolume(name: string): Promise<VolumeRecord | null> {
    const row = await this.one(SQL.getVolume, [name]);
    return row ? volumeFromRow(row) : null;
  }

  async listVolumes(): Promise<VolumeRecord[]> {
    return (await this.sql.rows(SQL.listVolumes)).map(volumeFromRow);
  }

  async deleteVolume(name: string): Promise<boolean> {
    return (await this.sql.count(SQL.deleteVolume, [name])) > 0;
  }

  async sandboxesOfFork(fork: string): Promise<SandboxRecord[]> {
    return (await this.sql.rows(SQL.sandboxesOfFork, [fork])).map(sandboxFromRow);
  }

  async sandboxesMounting(name: string): Promise<string[]> {
    const pattern = `%${JSON.stringify({ name })
      .slice(1, -1)
      .replace(/[!%_]/g, (c) => `!${c}`)}%`;
    const rows = await this.sql.rows(SQL.sandboxesMounting, [pattern]);
    return rows
      .filter((r) => (JSON.parse(String(r.volumes)) as Array<{ name: string }>).some((m) => m.name === name))
      .map((r) => String(r.id));
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

  insertProcess(rec: ProcessRecord): Promise<void> {
    return this.processes.insert(rec);
  }

  updateProcess(id: string, patch: Partial<Omit<ProcessRecord, 'id' | 'sandbox_id'>>): Promise<ProcessRecord | null> {
    return this.processes.update(id, patch);
  }

  getProcess(id: string): Promise<ProcessRecord | null> {
    return this.processes.get(id);
  }

  listProcesses(filter?: ProcessFilter): Promise<ProcessRecord[]> {
    return this.processes.list(filter);
  }

  deleteProcess(id: string): Promise<boolean> {
    return this.processes.delete(id);
  }

  insertWarm(rec: WarmRecord): Promise<void> {
    return this.warm.insert(rec);
  }

  claimWarm(shape: string, workerId: string): Promise<WarmRecord | null> {
    return this.warm.claim(shape, workerId);
  }

  listWarm(workerId?: string): Promise<WarmRecord[]> {
    return this.warm.list(workerId);
  }

  deleteWarm(sandboxId: string): Promise<boolean> {
    return this.warm.delete(sandboxId);
  }

  async takePoolUid(runtimeId: string): Promise<number> {
    // One statement: the row is made or advanced and read back under the same lock (both dialects).
    const rows = await this.sql.rows(
      `INSERT INTO pool_uids (runtime_id, uids_given) VALUES (?, 1)
        ON CONFLICT (runtime_id) DO UPDATE SET uids_given = pool_uids.uids_given + 1 RETURNING uids_given`,
      [runtimeId],
    );
    return Number(rows[0]!.uids_given) - 1;
  }

  async forgetPoolRuntime(runtimeId: string): Promise<void> {
    await this.sql.count('DELETE FROM pool_uids WHERE runtime_id = ?', [runtimeId]);
  }
  // ---------------------------------------------------------------- secrets (DESIGN.md §15), tables of migration 16
  readonly insertSecret = (rec: SecretRecord) => this.secrets.insertSecret(rec);
  readonly getSecret = (ownerKey: string, name: string) => this.secrets.getSecret(ownerKey, name);
  readonly listSecrets = (ownerKey: string | null) => this.secrets.listSecrets(ownerKey);
  readonly updateSecret: SecretStore['updateSecret'] = (ownerKey, name, patch) => this.secrets.updateSecret(ownerKey, name, patch);
  readonly deleteSecret = (ownerKey: string, name: string) => this.secrets.deleteSecret(ownerKey, name);
  readonly countSecrets = () => this.secrets.countSecrets();
  readonly insertSecretBindings = (bindings: readonly SecretBinding[]) => this.secrets.insertSecretBindings(bindings);
  readonly secretBindings = (sandboxId: string) => this.secrets.secretBindings(sandboxId);
  readonly deleteSecretBindings = (sandboxId: string) => this.secrets.deleteSecretBindings(sandboxId);
}
