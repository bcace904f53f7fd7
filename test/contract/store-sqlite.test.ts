import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { MIGRATIONS } from '../../src/adapters/stores/sqlite/migrations.js';
import { at, sandbox, when } from './store-fixtures.js';
import { buildChild, runChild } from './store-sqlite-child.js';

// The Store contract against SQLite runs in the unit tier: store-sqlite-contract.test.ts.

describe('sqlite store file handling', () => {
  let dir: string;
  let child: { script: string; moduleFile: string };

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-store-proc-'));
    child = buildChild(join(dir, 'build'));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it('creates the parent directory and uses WAL journaling', async () => {
    const path = join(dir, 'a', 'b', 'wal.db');
    const store = await createSqliteStore({ path });
    await store.migrate();
    await store.close();
    expect(existsSync(path)).toBe(true);
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
      const versions = raw.prepare('SELECT version FROM schema_migrations ORDER BY version').all() as Array<{ version: number }>;
      expect(versions.map((v) => v.version)).toEqual(MIGRATIONS.map((m) => m.version));
    } finally {
      raw.close();
    }
  });

  it('shares one file with a second process while open', async () => {
    const path = join(dir, 'shared', 'sbx.db');
    const store = await createSqliteStore({ path });
    try {
      await store.migrate();
      await store.insertSandbox(sandbox('sb-parent'));
      const mine = await store.acquireLease('shared-lease', 'sb-parent', 60_000, when(0));
      expect(mine?.generation).toBe(1);

      const result = await runChild(child, path, 'sb-child', at(1000));
      expect(result.sandboxes).toEqual(['sb-parent', 'sb-child']);
      expect(result.lease).toBeNull(); // the parent's lease is unexpired at the child's `now`

      expect((await store.getSandbox('sb-child'))?.metadata).toEqual({ from: 'child' });
      await store.updateSandbox('sb-child', { state: 'destroyed' });
      expect((await store.getSandbox('sb-child'))?.state).toBe('destroyed');
    } finally {
      await store.close();
    }
  });

  it('lets two processes migrate a fresh file at once; one wins the lease', async () => {
    const path = join(dir, 'race', 'sbx.db');
    const [a, b] = await Promise.all([runChild(child, path, 'sb-one', at(0)), runChild(child, path, 'sb-two', at(0))]);
    const winners = [a.lease, b.lease].filter((l) => l !== null);
    expect(winners).toHaveLength(1);
    expect(winners[0]!.generation).toBe(1);

    const store = await createSqliteStore({ path });
    try {
      await store.migrate();
      expect((await store.listSandboxes()).map((s) => s.id).sort()).toEqual(['sb-one', 'sb-two']);
      expect((await store.getLease('shared-lease'))?.holder_id).toBe(winners[0]!.holder_id);
    } finally {
      await store.close();
    }
    const raw = new Database(path, { readonly: true });
    try {
      const n = raw.prepare('SELECT COUNT(*) AS n FROM schema_migrations').get() as { n: number };
      expect(n.n).toBe(MIGRATIONS.length);
    } finally {
      raw.close();
    }
  });
});

describe('sqlite: a provider count is an index range, not a listing (DESIGN.md §13)', () => {
  it('GET /providers/{name} counts with a covering index on (provider, state, expires_at)', async () => {
    const { COUNT_OF_PROVIDER } = await import('../../src/adapters/stores/shared/queries.js');
    const dir = mkdtempSync(join(tmpdir(), 'sbx-store-plan-'));
    try {
      const path = join(dir, 'sbx.db');
      const store = await createSqliteStore({ path });
      await store.migrate();
      for (let i = 0; i < 50; i++) await store.insertSandbox(sandbox(`sb-plan-${i}`, { provider: i % 2 ? 'docker' : 'proot' }));
      expect(await store.countOfProvider(at(0), 'docker')).toBe(25);
      await store.close();
      const db = new Database(path, { readonly: true });
      try {
        const plan = db
          .prepare(`EXPLAIN QUERY PLAN ${COUNT_OF_PROVIDER}`)
          .all('docker', at(0))
          .map((r) => (r as { detail: string }).detail);
        expect(plan.join('\n')).toMatch(/USING COVERING INDEX sandboxes_provider_live_idx/);
        expect(plan.join('\n')).not.toMatch(/SCAN sandboxes\b/);
      } finally {
        db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
