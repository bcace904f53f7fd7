import type Database from 'better-sqlite3';

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
    sql: `
      CREATE TABLE sandboxes (
        id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        provider TEXT NOT NULL,
        image TEXT NOT NULL,
        memory_mb INTEGER NOT NULL,
        vcpus INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        owner_id TEXT,
        worker_id TEXT NOT NULL,
        runtime_id TEXT,
        template TEXT
      );
      CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
      CREATE INDEX sandboxes_state_idx ON sandboxes (state, created_at, id);
      CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);
      CREATE INDEX sandboxes_worker_idx ON sandboxes (worker_id, created_at, id);

      CREATE TABLE templates (
        name TEXT PRIMARY KEY,
        image TEXT,
        memory_mb INTEGER,
        vcpus INTEGER,
        ttl TEXT,
        provider TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );

      CREATE TABLE owner_quotas (
        owner_id TEXT PRIMARY KEY,
        max_sandboxes INTEGER NOT NULL,
        max_ttl_ms INTEGER NOT NULL,
        max_exec_timeout_ms INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );

      CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        hostname TEXT NOT NULL,
        status TEXT NOT NULL,
        providers TEXT NOT NULL DEFAULT '[]',
        capabilities TEXT NOT NULL DEFAULT '[]',
        capacity TEXT NOT NULL DEFAULT '{}',
        last_heartbeat TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );

      CREATE TABLE leases (
        resource_id TEXT PRIMARY KEY,
        holder_id TEXT NOT NULL,
        generation INTEGER NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX leases_holder_idx ON leases (holder_id);

      CREATE TABLE admin_audit (
        id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        actor TEXT NOT NULL,
        method TEXT NOT NULL,
        path TEXT NOT NULL,
        status INTEGER NOT NULL,
        duration_ms REAL NOT NULL,
        request_id TEXT NOT NULL,
        remote_addr TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX admin_audit_created_idx ON admin_audit (created_at, id);

      CREATE TABLE meta (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
      );
    `,
  },
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
