import type Database from 'better-sqlite3';
import { unavailable } from '../../../core/errors.js';
import type { LeaseRecord, LeaseResult } from '../../../core/ports/index.js';
import { SQL } from '../shared/queries.js';
import { leaseFromRow, mayAcquire, renewRefusal, type Row } from '../shared/records.js';
import type { SqlDriver } from '../sql/driver.js';
import { SqlStore } from '../sql/store.js';
import { LATEST_VERSION, applyMigrations } from './migrations.js';

const UPSERT_LEASE = `INSERT INTO leases (resource_id, holder_id, generation, expires_at) VALUES (?, ?, ?, ?)
  ON CONFLICT (resource_id) DO UPDATE SET holder_id = excluded.holder_id, generation = excluded.generation,
  expires_at = excluded.expires_at`;

/**
 * SqlDriver over one better-sqlite3 connection. The driver is synchronous, so every call
 * finishes its SQL before yielding; the lease steps run in IMMEDIATE transactions (synchronous,
 * as better-sqlite3 requires), which also serialize against other processes sharing the file.
 */
/** How often the planner's statistics are refreshed (`PRAGMA optimize`). */
const OPTIMIZE_EVERY_MS = 60_000;

export class SqliteDriver implements SqlDriver {
  readonly name = 'sqlite';
  private readonly statements = new Map<string, Database.Statement>();
  private closed = false;
  private optimizer: NodeJS.Timeout | undefined;

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

  private allSync(sql: string, params: unknown[] = []): Row[] {
    return this.stmt(sql).all(...params) as Row[];
  }

  private runSync(sql: string, params: unknown[] = []): number {
    return this.stmt(sql).run(...params).changes;
  }

  private currentLease(resourceId: string): LeaseRecord | null {
    const row = this.stmt(SQL.getLease).get(resourceId) as Row | undefined;
    return row ? leaseFromRow(row) : null;
  }

  async rows(sql: string, params: unknown[] = []): Promise<Row[]> {
    const s = this.stmt(sql);
    // Statements that return nothing (e.g. INSERT without RETURNING) cannot use all().
    return s.reader ? (s.all(...params) as Row[]) : (s.run(...params), []);
  }

  async count(sql: string, params: unknown[] = []): Promise<number> {
    return this.runSync(sql, params);
  }

  async migrate(): Promise<void> {
    if (this.closed) throw unavailable('sqlite store is closed');
    applyMigrations(this.db, () => new Date().toISOString());
    this.runSync(SQL.setMeta, ['schema_version', String(LATEST_VERSION)]);
    this.optimize();
    // The planner's statistics follow the data (what PostgreSQL's autovacuum does there): with
    // them, counts and list pages use the live and listed indexes instead of sorting every row.
    this.optimizer ??= setInterval(() => this.optimize(), OPTIMIZE_EVERY_MS);
    this.optimizer.unref();
  }

  /** `PRAGMA optimize`: re-analyzes the tables whose statistics are stale; cheap when none are. */
  private optimize(): void {
    if (this.closed) return;
    try {
      this.db.pragma('optimize=0x10002');
    } catch {
      // Busy or read-only: the next round tries again.
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.optimizer) clearInterval(this.optimizer);
    this.statements.clear();
    this.db.close();
  }

  async acquireLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseRecord | null> {
    const acquire = this.db.transaction((): LeaseRecord | null => {
      const current = this.currentLease(resourceId);
      if (!mayAcquire(current, holderId, now)) return null;
      const lease: LeaseRecord = {
        resource_id: resourceId,
        holder_id: holderId,
        generation: (current?.generation ?? 0) + 1,
        expires_at: expiresAt,
      };
      this.runSync(UPSERT_LEASE, [lease.resource_id, lease.holder_id, lease.generation, lease.expires_at]);
      return lease;
    });
    return acquire.immediate();
  }

  async renewLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseResult> {
    const renew = this.db.transaction((): LeaseResult => {
      const reason = renewRefusal(this.currentLease(resourceId), holderId, now);
      if (reason) return { ok: false, reason };
      const row = this.allSync(SQL.renewLease, [expiresAt, resourceId, holderId])[0]!;
      return { ok: true, lease: leaseFromRow(row) };
    });
    return renew.immediate();
  }
}

/** The Store port over one better-sqlite3 connection. */
export class SqliteStore extends SqlStore {
  constructor(db: Database.Database) {
    super(new SqliteDriver(db));
  }
}
