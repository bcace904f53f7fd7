import type { PoolClient } from 'pg';

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
    sql: `
      CREATE TABLE sandboxes (
        id ${C} PRIMARY KEY,
        state ${C} NOT NULL,
        provider TEXT NOT NULL,
        image TEXT NOT NULL,
        memory_mb INTEGER NOT NULL,
        vcpus INTEGER NOT NULL,
        created_at ${C} NOT NULL,
        updated_at ${C} NOT NULL,
        expires_at ${C} NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        owner_id ${C},
        worker_id ${C} NOT NULL,
        runtime_id TEXT,
        template TEXT
      );
      CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
      CREATE INDEX sandboxes_state_idx ON sandboxes (state, created_at, id);
      CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);
      CREATE INDEX sandboxes_worker_idx ON sandboxes (worker_id, created_at, id);

      CREATE TABLE templates (
        name ${C} PRIMARY KEY,
        image TEXT,
        memory_mb INTEGER,
        vcpus INTEGER,
        ttl TEXT,
        provider TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at ${C} NOT NULL,
        updated_at ${C} NOT NULL
      );

      CREATE TABLE owner_quotas (
        owner_id ${C} PRIMARY KEY,
        max_sandboxes INTEGER NOT NULL,
        max_ttl_ms BIGINT NOT NULL,
        max_exec_timeout_ms BIGINT NOT NULL,
        created_at ${C} NOT NULL,
        updated_at ${C} NOT NULL
      );

      CREATE TABLE workers (
        id ${C} PRIMARY KEY,
        hostname TEXT NOT NULL,
        status TEXT NOT NULL,
        providers TEXT NOT NULL DEFAULT '[]',
        capabilities TEXT NOT NULL DEFAULT '[]',
        capacity TEXT NOT NULL DEFAULT '{}',
        last_heartbeat ${C} NOT NULL,
        created_at ${C} NOT NULL,
        updated_at ${C} NOT NULL
      );

      CREATE TABLE leases (
        resource_id ${C} PRIMARY KEY,
        holder_id ${C} NOT NULL,
        generation BIGINT NOT NULL,
        expires_at ${C} NOT NULL
      );
      CREATE INDEX leases_holder_idx ON leases (holder_id);

      CREATE TABLE admin_audit (
        id ${C} PRIMARY KEY,
        created_at ${C} NOT NULL,
        actor ${C} NOT NULL,
        method TEXT NOT NULL,
        path ${C} NOT NULL,
        status INTEGER NOT NULL,
        duration_ms DOUBLE PRECISION NOT NULL,
        request_id TEXT NOT NULL,
        remote_addr TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX admin_audit_created_idx ON admin_audit (created_at, id);

      CREATE TABLE meta (
        key ${C} PRIMARY KEY,
        value TEXT NOT NULL
      );
    `,
  },
];

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

/**
 * Applies pending migrations in one transaction under an advisory lock keyed by the schema, so
 * control-plane replicas starting together apply each version exactly once. `schema` is an
 * already-validated identifier (or null for the connection's default search_path).
 */
export async function applyMigrations(client: PoolClient, schema: string | null): Promise<number[]> {
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
    const done = new Set(
      (await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version),
    );
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
