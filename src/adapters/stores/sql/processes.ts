import type { ProcessFilter, ProcessRecord, ProcessState } from '../../../core/ports/index.js';
import type { Row } from '../shared/records.js';
import type { SqlDriver } from './driver.js';

/** The ProcessStore role over a SqlDriver (table of migration 8). */
const COLUMNS = [
  'id',
  'sandbox_id',
  'command',
  'args',
  'mode',
  'state',
  'exit_code',
  'started_at',
  'ended_at',
  'runner',
  'holder',
  'deadline_at',
] as const;
const PATCHABLE = new Set<string>(COLUMNS.filter((c) => c !== 'id' && c !== 'sandbox_id'));

function fromRow(r: Row): ProcessRecord {
  return {
    id: String(r.id),
    sandbox_id: String(r.sandbox_id),
    command: String(r.command),
    args: JSON.parse(String(r.args)) as string[],
    mode: r.mode === 'argv' ? 'argv' : 'shell',
    state: String(r.state) as ProcessState,
    exit_code: r.exit_code == null ? null : Number(r.exit_code),
    started_at: String(r.started_at),
    ended_at: r.ended_at == null ? null : String(r.ended_at),
    runner: r.runner === 'detached' ? 'detached' : 'attached',
    holder: String(r.holder),
    deadline_at: r.deadline_at == null ? null : String(r.deadline_at),
  };
}

function value(column: string, v: unknown): unknown {
  return column === 'args' ? JSON.stringify(v) : v;
}

export class SqlProcesses {
  constructor(private readonly sql: SqlDriver) {}

  async insert(rec: ProcessRecord): Promise<void> {
    const cols = COLUMNS.join(', ');
    await this.sql.count(
      `INSERT INTO processes (${cols}) VALUES (${COLUMNS.map(() => '?').join(', ')})`,
      COLUMNS.map((c) => value(c, rec[c])),
    );
  }

  async update(id: string, patch: Partial<Omit<ProcessRecord, 'id' | 'sandbox_id'>>): Promise<ProcessRecord | null> {
    const pairs = Object.entries(patch).filter(([k, v]) => PATCHABLE.has(k) && v !== undefined);
    if (pairs.length === 0) return this.get(id);
    const rows = await this.sql.rows(
      `UPDATE processes SET ${pairs.map(([k]) => `${k} = ?`).join(', ')} WHERE id = ? RETURNING ${COLUMNS.join(', ')}`,
      [...pairs.map(([k, v]) => value(k, v)), id],
    );
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async get(id: string): Promise<ProcessRecord | null> {
    const rows = await this.sql.rows(`SELECT ${COLUMNS.join(', ')} FROM processes WHERE id = ?`, [id]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async list(filter: ProcessFilter = {}): Promise<ProcessRecord[]> {
    const where: string[] = [];
    const params: unknown[] = [];
    if (filter.sandbox_id !== undefined) {
      where.push('sandbox_id = ?');
      params.push(filter.sandbox_id);
    }
    if (filter.holder !== undefined) {
      where.push('holder = ?');
      params.push(filter.holder);
    }
    if (filter.states !== undefined) {
      if (filter.states.length === 0) return [];
      where.push(`state IN (${filter.states.map(() => '?').join(', ')})`);
      params.push(...filter.states);
    }
    const sql = `SELECT ${COLUMNS.join(', ')} FROM processes${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY started_at, id`;
    return (await this.sql.rows(sql, params)).map(fromRow);
  }

  async delete(id: string): Promise<boolean> {
    return (await this.sql.count('DELETE FROM processes WHERE id = ?', [id])) > 0;
  }
}
