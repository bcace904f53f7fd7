import type { PoolClient } from 'pg';
import {
  initialSchema,
  LIVE_COUNT_INDEXES,
  POSTGRES_LIVE_COUNTS,
  idempotencyKeys,
  NETWORK_COLUMNS,
  processesTable,
  snapshotsAndVolumes,
  warmRuntimes,
  VOLUME_WORKER,
  PROVIDER_COUNT_INDEX,
  SANDBOX_ENV,
  EGRESS_COLUMNS,
  POOL_UIDS,
  PROVIDER_NAMES,
  FORK_COLUMNS,
  POSTGRES_PAUSE,
} from '../shared/schema.js';
import { secretsTables } from '../shared/schema-secrets.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

// Text columns that are sorted or range-compared use COLLATE "C" so order is byte order, exactly as
// in SQLite. Timestamps and JSON are text so they round-trip byte-identical to what was inserted.
const C = 'TEXT COLLATE "C"';

/** Append-only: never edit a released migration, add a new version instead. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: initialSchema({ key: C, bigint: 'BIGINT', real: 'DOUBLE PRECISION' }),
  },
  { version: 2, name: 'live-count indexes', sql: LIVE_COUNT_INDEXES },
  {
    version: 3,
    name: 'replica shared state',
    // Admission slots of spawns still being created, and the event journal (DESIGN §7 "Replicas").
    sql: `
      CREATE TABLE IF NOT EXISTS admission_slots (
        id ${C} PRIMARY KEY,
        owner_id ${C},
        holder_id ${C} NOT NULL,
        expires_at ${C} NOT NULL
      );
      CREATE INDEX IF NOT EXISTS admission_slots_owner_idx ON admission_slots (owner_id);
      CREATE TABLE IF NOT EXISTS events (
        id BIGSERIAL PRIMARY KEY,
        replica_id TEXT NOT NULL,
        body TEXT NOT NULL
      );`,
  },
  { version: 4, name: 'live counters', sql: POSTGRES_LIVE_COUNTS },
  { version: 5, name: 'idempotency keys', sql: idempotencyKeys(C) },
  { version: 6, name: 'networks', sql: NETWORK_COLUMNS },
  { version: 7, name: 'snapshots and volumes', sql: snapshotsAndVolumes(C) },
  { version: 8, name: 'processes', sql: processesTable(C) },
  { version: 9, name: 'warm runtimes', sql: warmRuntimes(C) },
  { version: 10, name: 'egress rules', sql: EGRESS_COLUMNS },
  { version: 11, name: 'volume workers', sql: VOLUME_WORKER },
  { version: 12, name: 'pool uid counters', sql: POOL_UIDS },
  { version: 13, name: 'provider count index', sql: PROVIDER_COUNT_INDEX },
  { version: 14, name: 'sandbox env', sql: SANDBOX_ENV },
  { version: 15, name: 'canonical provider names', sql: PROVIDER_NAMES },
  { version: 16, name: 'forks', sql: FORK_COLUMNS },
  { version: 17, name: 'secrets', sql: secretsTables(C) },
  { version: 18, name: 'paused sandboxes', sql: POSTGRES_PAUSE },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Applies pending migrations in one transaction under an advisory lock keyed by the schema, so
 * control-plane replicas starting together apply each version exactly once. `schema` is an
 * already-validated identifier (or null for the connection's default search_path).
 */
export async function applyMigrations(client: Pick<PoolClient, 'query'>, schema: string | null): Promise<number[]> {
  const applied: number[] = [];
  await client.query('BEGIN');
  try {
    await client.query("SELECT pg_advisory_xact_lock(hashtext('sbx.migrate:' || $1))", [schema ?? '']);
    if (schema) await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
    await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version INTEGER PRIMARY KEY,
      name TEXT NOT NULL,
      applied_at TEXT NOT NULL
    )`);
    const done = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version));
    for (const m of MIGRATIONS) {
      if (done.has(m.version)) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [
        m.version,
        m.name,
        new Date().toISOString(),
      ]);
      applied.push(m.version);
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
  return applied;
}
