/**
 * Migration 12 (DESIGN §12): a store written before it, holding rows under the other spelling of a
 * provider's name (`custom-http`) — a sandbox, a template, a snapshot, a volume, a warm runtime and
 * a worker's advertised providers — reads them back under the canonical name (`custom_http`) once
 * the store migrates. On SQLite always, on PostgreSQL with SBX_TEST_POSTGRES_DSN.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../../src/adapters/stores/postgres/index.js';
import { MIGRATIONS as PG_MIGRATIONS } from '../../src/adapters/stores/postgres/migrations.js';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/adapters/stores/sqlite/migrations.js';
import type { Store } from '../../src/core/ports/index.js';

const BEFORE = 11;
const T = '2026-01-01T00:00:00.000Z';
const LATER = '2030-01-01T00:00:00.000Z';

/** Rows as an older sbx stored them. */
const INSERT_SANDBOX = `INSERT INTO sandboxes
     (id, state, provider, image, memory_mb, vcpus, created_at, updated_at, expires_at, metadata, owner_id, worker_id, runtime_id)`;
const OLD_ROWS = [
  `${INSERT_SANDBOX}
     VALUES ('sb-old1', 'running', 'custom-http', 'img', 64, 1, '${T}', '${T}', '${LATER}', '{}', NULL, 'local', 'rt-1')`,
  `${INSERT_SANDBOX}
     VALUES ('sb-old2', 'running', 'mock', 'img', 64, 1, '${T}', '${T}', '${LATER}', '{}', NULL, 'local', 'rt-2')`,
  `INSERT INTO templates (name, provider, metadata, created_at, updated_at) VALUES ('tpl-old', 'custom-http', '{}', '${T}', '${T}')`,
  `INSERT INTO snapshots (name, provider, image, size_bytes, created_at, sandbox_id, worker_id)
     VALUES ('snap-old', 'custom-http', 'img', 1, '${T}', 'sb-old1', 'local')`,
  `INSERT INTO volumes (name, provider, created_at) VALUES ('vol-old', 'custom-http', '${T}')`,
  `INSERT INTO warm_runtimes (sandbox_id, shape, provider, runtime_id, worker_id, created_at)
     VALUES ('sb-warm', '["custom-http","img",64,1,""]', 'custom-http', 'rt-w', 'local', '${T}')`,
  `INSERT INTO workers (id, hostname, status, providers, last_heartbeat, created_at, updated_at)
     VALUES ('w-old', 'h', 'online', '["custom-http","mock"]', '${T}', '${T}', '${T}')`,
];

async function expectCanonical(store: Store, readWarm: () => Promise<Array<{ provider: string; shape: string }>>): Promise<void> {
  expect((await store.getSandbox('sb-old1'))?.provider).toBe('custom_http');
  expect((await store.getSandbox('sb-old2'))?.provider).toBe('mock');
  expect((await store.getTemplate('tpl-old'))?.provider).toBe('custom_http');
  expect((await store.getSnapshot('snap-old'))?.provider).toBe('custom_http');
  expect((await store.getVolume('vol-old'))?.provider).toBe('custom_http');
  expect((await store.getWorker('w-old'))?.providers).toEqual(['custom_http', 'mock']);
  expect(await readWarm()).toEqual([{ provider: 'custom_http', shape: '["custom_http","img",64,1,""]' }]);
}

describe('migration 12: canonical provider names (sqlite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-names-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('rows stored as custom-http read back as custom_http', async () => {
    const path = join(dir, 'old.db');
    const raw = new Database(path);
    raw.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const m of SQLITE_MIGRATIONS.filter((x) => x.version <= BEFORE)) {
      raw.exec(m.sql);
      raw.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, T);
    }
    for (const row of OLD_ROWS) raw.exec(row);
    raw.close();

    const store = await createSqliteStore({ path });
    try {
      await store.migrate();
      await expectCanonical(store, async () => {
        const db = new Database(path, { readonly: true });
        try {
          return db.prepare('SELECT provider, shape FROM warm_runtimes').all() as Array<{ provider: string; shape: string }>;
        } finally {
          db.close();
        }
      });
    } finally {
      await store.close();
    }
  });
});

const DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';
const SKIP = DSN ? undefined : 'SBX_TEST_POSTGRES_DSN is not set (scripts/test-postgres-up.sh prints one)';

describe.skipIf(SKIP !== undefined)(`migration 12: canonical provider names (postgres)${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  const schema = `sbx_test_${randomBytes(6).toString('hex')}`;
  const client = new pg.Client({ connectionString: DSN, options: `-c search_path=${schema}` });
  afterAll(async () => {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await client.end().catch(() => undefined);
  });

  it('rows stored as custom-http read back as custom_http', async () => {
    await client.connect();
    await client.query(`CREATE SCHEMA "${schema}"`);
    await client.query('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    for (const m of PG_MIGRATIONS.filter((x) => x.version <= BEFORE)) {
      await client.query(m.sql);
      await client.query('INSERT INTO schema_migrations VALUES ($1, $2, $3)', [m.version, m.name, T]);
    }
    for (const row of OLD_ROWS) await client.query(row);

    const store = await createPostgresStore({ dsn: DSN, schema });
    try {
      await store.migrate();
      await expectCanonical(store, async () => (await client.query('SELECT provider, shape FROM warm_runtimes')).rows);
    } finally {
      await store.close();
    }
  });
});
