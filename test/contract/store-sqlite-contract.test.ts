/**
 * The Store contract (store.contract.ts) against the SQLite adapter, in the unit tier: a SQLite
 * file in a temp directory, no process, no port. The file handling and the second process
 * sharing one file are in store-sqlite.test.ts (integration tier).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import type { Store } from '../../src/core/ports/index.js';
import { runStoreContract } from './store.contract.js';

runStoreContract('sqlite', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-store-'));
  // A missing parent directory: the adapter must create it.
  const path = join(dir, 'nested', 'sbx.db');
  const opened: Store[] = [await createSqliteStore({ path })];
  return {
    store: opened[0]!,
    async reopen() {
      const s = await createSqliteStore({ path });
      opened.push(s);
      return s;
    },
    async cleanup() {
      for (const s of opened) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
