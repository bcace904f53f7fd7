import type Database from 'better-sqlite3';
import {
  initialSchema,
  LIVE_COUNT_INDEXES,
  SQLITE_LIVE_COUNTS,
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
  SQLITE_PAUSE,
} from '../shared/schema.js';
import { secretsTables } from '../shared/schema-secrets.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

/** Append-only: never edit a released migration, add a new version instead. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: initialSchema({ key: 'TEXT', bigint: 'INTEGER', real: 'REAL' }),
  },
  { version: 2, name: 'live-count indexes', sql: LIVE_COUNT_INDEXES },
  // Version 3 is PostgreSQL's replica state; the versions stay aligned across dialects.
  { version: 3, name: 'replica shared state (PostgreSQL only)', sql: 'SELECT 1;' },
  { version: 4, name: 'live counters', sql: SQLITE_LIVE_COUNTS },
  { version: 5, name: 'idempotency keys', sql: idempotencyKeys('TEXT') },
  { version: 6, name: 'networks', sql: NETWORK_COLUMNS },
  { version: 7, name: 'snapshots and volumes', sql: snapshotsAndVolumes('TEXT') },
  { version: 8, name: 'processes', sql: processesTable('TEXT') },
  { version: 9, name: 'warm runtimes', sql: warmRuntimes('TEXT') },
  { version: 10, name: 'egress rules', sql: EGRESS_COLUMNS },
  { version: 11, name: 'volume workers', sql: VOLUME_WORKER },
  { version: 12, name: 'pool uid counters', sql: POOL_UIDS },
  { version: 13, name: 'provider count index', sql: PROVIDER_COUNT_INDEX },
  { version: 14, name: 'sandbox env', sql: SANDBOX_ENV },
  { version: 15, name: 'canonical provider names', sql: PROVIDER_NAMES },
  { version: 16, name: 'forks', sql: FORK_COLUMNS },
  { version: 17, name: 'secrets', sql: secretsTables('TEXT') },
  { version: 18, name: 'paused sandboxes', sql: SQLITE_PAUSE },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Applies pending migrations, each in its own IMMEDIATE transaction that re-reads the applied
 * set, so two processes migrating one file at once apply every version exactly once.
 */
export function applyMigrations(db: Database.Database, now: () => string): number[] {
  db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
  )`);
  const isApplied = db.prepare('SELECT 1 FROM schema_migrations WHERE version = ?');
  const record = db.prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)');
  const applied: number[] = [];
  for (const m of MIGRATIONS) {
    const apply = db.transaction(() => {
      if (isApplied.get(m.version)) return;
      db.exec(m.sql);
      record.run(m.version, m.name, now());
      applied.push(m.version);
    });
    apply.immediate();
  }
  return applied;
}
