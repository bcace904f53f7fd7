import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { createPostgresStore } from '../../src/adapters/stores/postgres/index.js';
import { SbxError } from '../../src/core/errors.js';
import type { Store } from '../../src/core/ports/index.js';
import { runStoreContract } from './store.contract.js';
import { at, sandbox, when } from './store-fixtures.js';

const DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';
const SKIP = DSN ? undefined : 'SBX_TEST_POSTGRES_DSN is not set (scripts/test-postgres-up.sh prints one)';

const freshSchema = () => `sbx_test_${randomBytes(6).toString('hex')}`;

async function dropSchema(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: DSN });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  } finally {
    await client.end();
  }
}

runStoreContract(
  'postgres',
  async () => {
    // Each test gets its own schema, so runs (and parallel CI jobs) never collide.
    const schema = freshSchema();
    const opened: Store[] = [await createPostgresStore({ dsn: DSN, schema })];
    return {
      store: opened[0]!,
      async reopen() {
        const s = await createPostgresStore({ dsn: DSN, schema });
        opened.push(s);
        return s;
      },
      async cleanup() {
        for (const s of opened) await s.close();
        await dropSchema(schema);
      },
    };
  },
  { skipReason: SKIP },
);

describe.skipIf(SKIP !== undefined)(`postgres store specifics${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const s of schemas) await dropSchema(s);
  });

  it('never puts the DSN or password in connection errors', async () => {
    const secret = 'N0t-The-Real-Pw-7731';
    const url = new URL(DSN);
    const cases = [
      `postgres://${url.username}:${secret}@${url.host}${url.pathname}`, // wrong password
      `postgres://${url.username}:${secret}@127.0.0.1:1/nowhere`, // nothing listening
      `postgres://${url.username}:${secret}@[not-a-host`, // unparsable
    ];
    for (const dsn of cases) {
      const err = await createPostgresStore({ dsn }).then(
        async (s) => {
          await s.close();
          return new Error('connected unexpectedly');
        },
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(SbxError);
      expect((err as SbxError).code).toBe('unavailable');
      const text = `${(err as Error).message} ${(err as Error).stack ?? ''} ${JSON.stringify(err)}`;
      expect(text).not.toContain(secret);
      expect(text).not.toContain(dsn);
    }
  });

  it('rejects a schema name that is not a plain identifier', async () => {
    const err = await createPostgresStore({ dsn: DSN, schema: 'x"; DROP TABLE y; --' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SbxError);
    expect((err as SbxError).code).toBe('bad_request');
  });

  it('lets two replicas migrate one schema at once and race for one lease', async () => {
    const schema = freshSchema();
    schemas.push(schema);
    const [a, b] = await Promise.all([createPostgresStore({ dsn: DSN, schema }), createPostgresStore({ dsn: DSN, schema })]);
    try {
      await Promise.all([a.migrate(), b.migrate()]);
      await a.insertSandbox(sandbox('sb-shared'));
      expect((await b.getSandbox('sb-shared'))?.id).toBe('sb-shared');

      const contenders = Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).acquireLease('sb-shared', `w-${i}`, 60_000, when(0)));
      const winners = (await Promise.all(contenders)).filter((l) => l !== null);
      expect(winners).toHaveLength(1);
      expect(await a.getLease('sb-shared')).toEqual(winners[0]);

      const holder = winners[0]!.holder_id;
      const renewals = await Promise.all([
        a.renewLease('sb-shared', holder, 60_000, when(1000)),
        b.renewLease('sb-shared', holder, 60_000, when(2000)),
      ]);
      expect(renewals.every((r) => r.ok)).toBe(true);
      const gens = renewals.map((r) => (r.ok ? r.lease.generation : 0)).sort();
      expect(gens).toEqual([2, 3]);
      expect((await b.getLease('sb-shared'))?.generation).toBe(3);
      expect((await b.getLease('sb-shared'))?.expires_at).toMatch(/^2025-01-01T00:01:0[12]\.000Z$/);
      expect(at(0)).toBe('2025-01-01T00:00:00.000Z');

      // Replicas starting at once each claim an installation id; both end up with the same one.
      const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => (i % 2 === 0 ? a : b).claimMeta('installation_id', `id-${i}`)));
      expect(new Set(claims).size).toBe(1);
      expect(await b.getMeta('installation_id')).toBe(claims[0]);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
