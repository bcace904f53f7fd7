/**
 * The first version of the schema, written once for both dialects: the column types that differ
 * are the only parameters (SQLite's TEXT, INTEGER, REAL; PostgreSQL's byte-ordered TEXT, BIGINT,
 * DOUBLE PRECISION). Later versions are per dialect in each migrations file.
 */
export interface DialectTypes {
  /** Text that is sorted or range-compared: byte order in both stores. */
  key: string;
  /** 64-bit integers. */
  bigint: string;
  /** Floating point. */
  real: string;
}

export function initialSchema(t: DialectTypes): string {
  return `
      CREATE TABLE sandboxes (
        id ${t.key} PRIMARY KEY,
        state ${t.key} NOT NULL,
        provider TEXT NOT NULL,
        image TEXT NOT NULL,
        memory_mb INTEGER NOT NULL,
        vcpus INTEGER NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL,
        expires_at ${t.key} NOT NULL,
        metadata TEXT NOT NULL DEFAULT '{}',
        owner_id ${t.key},
        worker_id ${t.key} NOT NULL,
        runtime_id TEXT,
        template TEXT
      );
      CREATE INDEX sandboxes_created_idx ON sandboxes (created_at, id);
      CREATE INDEX sandboxes_state_idx ON sandboxes (state, created_at, id);
      CREATE INDEX sandboxes_owner_idx ON sandboxes (owner_id, created_at, id);
      CREATE INDEX sandboxes_worker_idx ON sandboxes (worker_id, created_at, id);

      CREATE TABLE templates (
        name ${t.key} PRIMARY KEY,
        image TEXT,
        memory_mb INTEGER,
        vcpus INTEGER,
        ttl TEXT,
        provider TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE owner_quotas (
        owner_id ${t.key} PRIMARY KEY,
        max_sandboxes INTEGER NOT NULL,
        max_ttl_ms ${t.bigint} NOT NULL,
        max_exec_timeout_ms ${t.bigint} NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE workers (
        id ${t.key} PRIMARY KEY,
        hostname TEXT NOT NULL,
        status TEXT NOT NULL,
        providers TEXT NOT NULL DEFAULT '[]',
        capabilities TEXT NOT NULL DEFAULT '[]',
        capacity TEXT NOT NULL DEFAULT '{}',
        last_heartbeat ${t.key} NOT NULL,
        created_at ${t.key} NOT NULL,
        updated_at ${t.key} NOT NULL
      );

      CREATE TABLE leases (
        resource_id ${t.key} PRIMARY KEY,
        holder_id ${t.key} NOT NULL,
        generation ${t.bigint} NOT NULL,
        expires_at ${t.key} NOT NULL
      );
      CREATE INDEX leases_holder_idx ON leases (holder_id);

      CREATE TABLE admin_audit (
        id ${t.key} PRIMARY KEY,
        created_at ${t.key} NOT NULL,
        actor ${t.key} NOT NULL,
        method TEXT NOT NULL,
        path ${t.key} NOT NULL,
        status INTEGER NOT NULL,
        duration_ms ${t.real} NOT NULL,
        request_id TEXT NOT NULL,
        remote_addr TEXT NOT NULL,
        user_agent TEXT NOT NULL
      );
      CREATE INDEX admin_audit_created_idx ON admin_audit (created_at, id);

      CREATE TABLE meta (
        key ${t.key} PRIMARY KEY,
        value TEXT NOT NULL
      );
    `;
}

/**
 * Version 2 (DESIGN.md §13): indexes that let admission and placement count live sandboxes
 * (state, then the expiry range) in total, per owner and per worker without reading rows, and a
 * partial index in list order over the listed states, so a page reads about a page of rows.
 */
export const LIVE_COUNT_INDEXES = `
  CREATE INDEX IF NOT EXISTS sandboxes_live_idx ON sandboxes (state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_owner_live_idx ON sandboxes (owner_id, state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_worker_live_idx ON sandboxes (worker_id, state, expires_at);
  CREATE INDEX IF NOT EXISTS sandboxes_listed_idx ON sandboxes (created_at, id) WHERE state IN ('running', 'unhealthy', 'error');
`;
