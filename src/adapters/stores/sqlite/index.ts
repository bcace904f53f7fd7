import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type { Store } from '../../../core/ports/index.js';
import { SqliteStore } from './store.js';

export interface SqliteStoreOptions {
  /** Database file; its parent directory is created. `:memory:` for a private in-memory store. */
  path: string;
  /** How long a statement waits for another process's write lock. Default 5000 ms. */
  busyTimeoutMs?: number;
}

/** Opens (creating if needed) the SQLite store at `path`; call `migrate()` before use. */
export async function createSqliteStore(opts: SqliteStoreOptions): Promise<Store> {
  const inMemory = opts.path === ':memory:';
  // 0700: the store holds owner ids, audit history and worker endpoints.
  if (!inMemory) mkdirSync(dirname(opts.path), { recursive: true, mode: 0o700 });
  const db = new Database(opts.path);
  try {
    // busy_timeout first so the WAL switch itself waits for a concurrent opener.
    db.pragma(`busy_timeout = ${Math.max(0, Math.floor(opts.busyTimeoutMs ?? 5000))}`);
    if (!inMemory) db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
  } catch (err) {
    db.close();
    throw err;
  }
  return new SqliteStore(db);
}

export { SqliteStore } from './store.js';
