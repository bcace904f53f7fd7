import type pg from 'pg';
import type { Pool, PoolClient, QueryResult } from 'pg';
import { unavailable } from '../../../core/errors.js';
import type { LeaseRecord, LeaseResult } from '../../../core/ports/index.js';
import { SQL } from '../shared/queries.js';
import { leaseFromRow, renewRefusal, type Row } from '../shared/records.js';
import type { SqlDriver } from '../sql/driver.js';
import { SqlStore } from '../sql/store.js';
import type { SharedState } from '../../../core/ports/index.js';
import { storeError } from './errors.js';
import { pgSharedState } from './shared.js';
import { LATEST_VERSION, applyMigrations } from './migrations.js';

// One statement: the unique index serializes concurrent inserts, ON CONFLICT locks the existing
// row and re-checks the WHERE against its latest version, so exactly one contender wins.
const ACQUIRE_LEASE = `INSERT INTO leases (resource_id, holder_id, generation, expires_at) VALUES ($1, $2, 1, $3)
  ON CONFLICT (resource_id) DO UPDATE SET holder_id = excluded.holder_id, generation = leases.generation + 1,
  expires_at = excluded.expires_at
  WHERE leases.holder_id = excluded.holder_id OR leases.expires_at::timestamptz <= $4::timestamptz
  RETURNING resource_id, holder_id, generation, expires_at`;

const LOCK_LEASE = 'SELECT resource_id, holder_id, generation, expires_at FROM leases WHERE resource_id = $1 FOR UPDATE';

/** A statement as sent: `$n` placeholders, and the name it is prepared under on each connection. */
interface Prepared {
  text: string;
  name?: string;
}

const prepared = new Map<string, Prepared>();
/**
 * Distinct statement texts prepared by name. Our statements are a fixed set plus a few shapes of
 * list filters; past this bound a text is sent unnamed (parsed each time), so a long-running process
 * never grows the server's per-connection statement cache without limit.
 */
const MAX_PREPARED = 256;

/**
 * Rewrites `?` placeholders as `$1…$n` (our SQL has no `?` inside literals) and names the
 * statement: each pooled connection parses and plans it once, then only binds and executes.
 */
function pgStatement(sql: string): Prepared {
  let out = prepared.get(sql);
  if (out === undefined) {
    let n = 0;
    const text = sql.replace(/\?/g, () => `$${++n}`);
    out = prepared.size < MAX_PREPARED ? { text, name: `sbx_${prepared.size}` } : { text };
    prepared.set(sql, out);
  }
  return out;
}

type Queryable = Pick<PoolClient, 'query'>;

/** SqlDriver over a pg Pool; every driver error leaves as a redacted SbxError. */
export class PostgresDriver implements SqlDriver {
  readonly name = 'postgres';
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly schema: string | null,
    private readonly redact: (text: string) => string,
    private readonly newClient: () => pg.Client,
  ) {}

  private async exec(sql: string, params: unknown[], on: Queryable): Promise<{ rows: Row[]; rowCount: number | null }> {
    if (this.closed) throw unavailable('postgres store is closed');
    try {
      const st = pgStatement(sql);
      return await on.query<Row>(st.name ? { name: st.name, text: st.text, values: params } : { text: st.text, values: params });
    } catch (err) {
      throw storeError(err, this.redact);
    }
  }

  async rows(sql: string, params: unknown[] = []): Promise<Row[]> {
    return (await this.exec(sql, params, this.pool)).rows;
  }

  async count(sql: string, params: unknown[] = []): Promise<number> {
    return (await this.exec(sql, params, this.pool)).rowCount ?? 0;
  }

  private async connect(): Promise<PoolClient> {
    if (this.closed) throw unavailable('postgres store is closed');
    try {
      return await this.pool.connect();
    } catch (err) {
      throw storeError(err, this.redact);
    }
  }

  /** One statement with `$n` placeholders on the pool; errors leave redacted. */
  async query(sql: string, params: unknown[] = []): Promise<QueryResult> {
    return (await this.exec(sql, params, this.pool)) as QueryResult;
  }

  /**
   * `fn` in one transaction; its `q` runs statements on the transaction's connection. `lead`, a
   * statement without parameters (a lock), travels with BEGIN in one round trip.
   */
  transact<T>(fn: (q: (sql: string, params?: unknown[]) => Promise<QueryResult>) => Promise<T>, lead?: string): Promise<T> {
    return this.transaction((client) => fn(async (sql, params = []) => (await this.exec(sql, params, client)) as QueryResult), lead);
  }

  private async transaction<T>(fn: (client: PoolClient) => Promise<T>, lead?: string): Promise<T> {
    const client = await this.connect();
    try {
      await this.begin(client, lead);
      const result = await fn(client);
      await this.simple('COMMIT', client);
      client.release();
      return result;
    } catch (err) {
      const rolledBack = await client.query('ROLLBACK').then(
        () => true,
        () => false,
      );
      // A connection that could not roll back is broken: destroy it instead of pooling it.
      client.release(rolledBack ? undefined : true);
      throw storeError(err, this.redact);
    }
  }

  /** BEGIN, and `lead` with it as one simple-protocol message (no parameters, several statements). */
  private begin(client: PoolClient, lead: string | undefined): Promise<void> {
    return this.simple(lead ? `BEGIN; ${lead}` : 'BEGIN', client);
  }

  /** A statement without parameters over the simple protocol: one message, nothing to prepare. */
  private async simple(sql: string, client: PoolClient): Promise<void> {
    if (this.closed) throw unavailable('postgres store is closed');
    try {
      await client.query(sql);
    } catch (err) {
      throw storeError(err, this.redact);
    }
  }

  async migrate(): Promise<void> {
    if (this.closed) throw unavailable('postgres store is closed');
    // A connection of its own, without the pool's query timeout: a migration on a large
    // database (an index, the live counters' seed) may take longer than a request may.
    const client = this.newClient();
    try {
      await client.connect();
      await applyMigrations(client, this.schema);
    } catch (err) {
      throw storeError(err, this.redact, 'postgres store migration');
    } finally {
      await client.end().catch(() => undefined);
    }
    await this.count(SQL.setMeta, ['schema_version', String(LATEST_VERSION)]);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  async acquireLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseRecord | null> {
    const row = (await this.rows(ACQUIRE_LEASE, [resourceId, holderId, expiresAt, now.toISOString()]))[0];
    return row ? leaseFromRow(row) : null;
  }

  async renewLease(resourceId: string, holderId: string, expiresAt: string, now: Date): Promise<LeaseResult> {
    return this.transaction(async (client): Promise<LeaseResult> => {
      const current = (await this.exec(LOCK_LEASE, [resourceId], client)).rows[0];
      const reason = renewRefusal(current ? leaseFromRow(current) : null, holderId, now);
      if (reason) return { ok: false, reason };
      const row = (await this.exec(SQL.renewLease, [expiresAt, resourceId, holderId], client)).rows[0];
      return { ok: true, lease: leaseFromRow(row!) };
    });
  }
}

/** The Store port over a pg Pool, with the state replicas share (admission slots, event journal). */
export class PostgresStore extends SqlStore {
  readonly shared: SharedState;

  constructor(pool: Pool, schema: string | null, redact: (text: string) => string, newClient: () => pg.Client) {
    const driver = new PostgresDriver(pool, schema, redact, newClient);
    super(driver);
    this.shared = pgSharedState(
      (sql, params) => driver.query(sql, params),
      (fn, lead) => driver.transact(fn, lead),
      newClient,
    );
  }
}
