import type { WarmRecord } from '../../../core/ports/index.js';
import type { Row } from '../shared/records.js';
import type { SqlDriver } from './driver.js';

const COLUMNS = ['sandbox_id', 'shape', 'provider', 'runtime_id', 'network', 'worker_id', 'created_at'] as const;
const LIST = COLUMNS.join(', ');

function fromRow(r: Row): WarmRecord {
  return {
    sandbox_id: String(r.sandbox_id),
    shape: String(r.shape),
    provider: String(r.provider),
    runtime_id: String(r.runtime_id),
    network: r.network == null ? null : String(r.network),
    worker_id: String(r.worker_id),
    created_at: String(r.created_at),
  };
}

/** The WarmStore role over a SqlDriver (table of migration 9). */
export class SqlWarm {
  constructor(private readonly sql: SqlDriver) {}

  async insert(rec: WarmRecord): Promise<void> {
    await this.sql.count(
      `INSERT INTO warm_runtimes (${LIST}) VALUES (${COLUMNS.map(() => '?').join(', ')})`,
      COLUMNS.map((c) => rec[c]),
    );
  }

  async claim(shape: string, workerId: string): Promise<WarmRecord | null> {
    // One statement: the row is gone for everyone else the moment it is returned. PostgreSQL skips
    // rows another claim holds instead of waiting for it; SQLite runs one writer at a time.
    const lock = this.sql.name === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
    const rows = await this.sql.rows(
      `DELETE FROM warm_runtimes WHERE sandbox_id = (SELECT sandbox_id FROM warm_runtimes WHERE worker_id = ? AND shape = ?
        ORDER BY created_at, sandbox_id LIMIT 1${lock}) RETURNING ${LIST}`,
      [workerId, shape],
    );
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async list(workerId?: string): Promise<WarmRecord[]> {
    const where = workerId !== undefined ? ' WHERE worker_id = ?' : '';
    return (
      await this.sql.rows(
        `SELECT ${LIST} FROM warm_runtimes${where} ORDER BY shape, created_at, sandbox_id`,
        workerId !== undefined ? [workerId] : [],
      )
    ).map(fromRow);
  }

  async delete(sandboxId: string): Promise<boolean> {
    return (await this.sql.count('DELETE FROM warm_runtimes WHERE sandbox_id = ?', [sandboxId])) > 0;
  }
}
