import pg from 'pg';
import { badRequest } from '../../../core/errors.js';
import type { Store } from '../../../core/ports/index.js';
import { makeRedactor, storeError } from './errors.js';
import { PostgresStore } from './store.js';

export interface PostgresStoreOptions {
  /** `postgres://user:password@host:port/db`. Never echoed in errors. */
  dsn: string;
  /** Schema holding sbx's tables (created by `migrate()`); default: the connection's search_path. */
  schema?: string;
  /** Pool size. Default 10. */
  maxConnections?: number;
}

const CONNECT_TIMEOUT_MS = 5_000;
const QUERY_TIMEOUT_MS = 8_000;
const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/;

/** Connects a pool to PostgreSQL and checks it answers; call `migrate()` before use. */
export async function createPostgresStore(opts: PostgresStoreOptions): Promise<Store> {
  if (!opts.dsn) throw badRequest('postgres store: database.dsn is required');
  const schema = opts.schema ?? null;
  if (schema !== null && !SCHEMA_NAME.test(schema)) {
    throw badRequest('postgres store: schema must match [a-z_][a-z0-9_]* (at most 63 characters)');
  }
  const redact = makeRedactor(opts.dsn);
  let pool: pg.Pool;
  const connection = {
    connectionString: opts.dsn,
    // Every connection resolves unqualified table names in our schema.
    ...(schema ? { options: `-c search_path=${schema}` } : {}),
    // A database that stops answering fails a request within these bounds (DESIGN §7: 503 within 10 s).
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    query_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
    application_name: 'sbx',
  };
  try {
    pool = new pg.Pool({ ...connection, max: opts.maxConnections ?? 10, idleTimeoutMillis: 30_000 });
  } catch (err) {
    throw storeError(err, redact, 'postgres store: invalid configuration', 'unavailable');
  }
  // An idle client losing its server must not crash the process; the next query reports it.
  pool.on('error', () => undefined);
  try {
    await pool.query('SELECT 1');
  } catch (err) {
    await pool.end().catch(() => undefined);
    throw storeError(err, redact, 'postgres store: cannot connect', 'unavailable');
  }
  // Connections outside the pool, without its query timeout: migrations and the journal's LISTEN.
  return new PostgresStore(pool, schema, redact, () => {
    const client = new pg.Client({ ...connection, query_timeout: undefined });
    client.on('error', () => undefined);
    return client;
  });
}

export { PostgresStore } from './store.js';
