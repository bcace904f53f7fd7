import { isAbsolute, join, resolve } from 'node:path';
import type { SbxConfig } from '../config/index.js';
import type { Store } from '../core/ports/index.js';

/** Expands a leading `~` against the given home directory; `:memory:` (a private in-memory SQLite store) stays as it is. */
export function expandHome(path: string, home: string): string {
  if (path === ':memory:') return path;
  if (path === '~') return home;
  if (path.startsWith('~/')) return join(home, path.slice(2));
  return isAbsolute(path) ? path : resolve(path);
}

/** Opens the configured store (embedded SQLite by default, PostgreSQL for multi-worker mode). */
export async function openStore(config: SbxConfig, home: string): Promise<Store> {
  if (config.database.driver === 'postgres') {
    const { createPostgresStore } = await import('../adapters/stores/postgres/index.js');
    return createPostgresStore({ dsn: config.database.dsn ?? '' });
  }
  const { createSqliteStore } = await import('../adapters/stores/sqlite/index.js');
  return createSqliteStore({ path: expandHome(config.database.path, home) });
}
