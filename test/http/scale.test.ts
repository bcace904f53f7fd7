/**
 * One control plane at fleet scale (DESIGN.md §13): admission exact from index counts with none and
 * with thousands of live sandboxes, and paged lists that walk every visible sandbox exactly once —
 * on SQLite always, on PostgreSQL when SBX_TEST_POSTGRES_DSN is set.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/index.js';
import type { SandboxRecord } from '../../src/core/ports/index.js';
import { lsCommand } from '../../src/transports/cli/commands/ls.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { call } from '../helpers/http.js';
import { dsnInSchema, POSTGRES_DSN, sql } from '../helpers/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const DSN = POSTGRES_DSN;
const ADMIN = 'scale-admin-key-0123456789';

/** Live rows straight into the store: a fleet without the cost of running it. */
async function seed(srv: TestServer, n: number, owner: string | null = null): Promise<void> {
  const now = Date.now();
  const base: Omit<SandboxRecord, 'id' | 'created_at'> = {
    state: 'running',
    provider: 'mock',
    image: 'x',
    memory_mb: 64,
    vcpus: 1,
    updated_at: new Date(now).toISOString(),
    expires_at: new Date(now + 3_600_000).toISOString(),
    metadata: {},
    owner_id: owner,
    worker_id: 'remote-elsewhere',
    runtime_id: null,
    template: null,
  };
  for (let i = 0; i < n; i++) {
    await srv.plane.deps.store.insertSandbox({
      ...base,
      id: `sb-seed-${owner ?? 'x'}-${String(i).padStart(5, '0')}`,
      created_at: new Date(now - 60_000 + i).toISOString(),
    });
  }
}

function scaleSuite(
  driver: string,
  database: () => Promise<Record<string, unknown>>,
  cleanup: () => Promise<void> = async () => undefined,
  skip?: string,
) {
  describe.skipIf(skip !== undefined)(`fleet scale on ${driver}${skip ? ` (skipped: ${skip})` : ''}`, () => {
    let srv: TestServer;
    beforeAll(async () => {
      srv = await startTestServer({
        database: await database(),
        defaults: { max_sandboxes: 2_010, max_sandboxes_per_owner: 0 },
        auth: { admin_api_key: ADMIN, enforce_ownership: true },
      });
    }, 60_000);
    afterAll(async () => {
      await srv?.close();
      await cleanup();
    });

    it('admits exactly the cap under 50 concurrent spawns, with none live and with 2,000 live', async () => {
      const spawnAll = () =>
        Promise.all(Array.from({ length: 50 }, () => call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' }, { 'x-user-id': 'load' })));
      // None live: a cap of 10 by the owner quota.
      await call(srv.url, 'PUT', '/api/v1/admin/quotas/load', { max_sandboxes: 10 }, { 'x-admin-api-key': ADMIN });
      let res = await spawnAll();
      expect(res.filter((r) => r.status === 201)).toHaveLength(10);
      expect(res.filter((r) => r.status !== 201).every((r) => r.status === 429)).toBe(true);
      for (const r of res.filter((x) => x.status === 201))
        await call(srv.url, 'DELETE', `/api/v1/sandboxes/${r.body.id}`, undefined, { 'x-user-id': 'load' });
      await call(srv.url, 'DELETE', '/api/v1/admin/quotas/load', undefined, { 'x-admin-api-key': ADMIN });
      // 2,000 live: the global cap of 2,010 leaves exactly 10.
      await seed(srv, 2_000);
      res = await spawnAll();
      expect(res.filter((r) => r.status === 201)).toHaveLength(10);
      expect(res.filter((r) => r.status !== 201).every((r) => r.status === 503)).toBe(true);
      const admission = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', {}, { 'x-user-id': 'load' });
      expect(admission.body).toMatchObject({ allowed: false, active_sandboxes: 2_010, max_sandboxes: 2_010, reason: 'max_sandboxes' });
      for (const r of res.filter((x) => x.status === 201))
        await call(srv.url, 'DELETE', `/api/v1/sandboxes/${r.body.id}`, undefined, { 'x-user-id': 'load' });
    }, 120_000);

    it('pages walk every visible sandbox once, by Link; other owners never show; a destroyed cursor row still continues', async () => {
      await seed(srv, 37, 'alice');
      await seed(srv, 5, 'bob');
      const alice = new Client({ url: srv.url, userId: 'alice' });
      const seen: string[] = [];
      let page = await alice.listPage({ limit: 10, id_prefix: 'sb-seed-' });
      const raw = await fetch(`${srv.url}/api/v1/sandboxes?limit=10&id_prefix=sb-seed-`, {
        headers: { 'x-user-id': 'alice', origin: 'http://localhost:3000' },
      });
      expect(raw.headers.get('link')).toMatch(/^<\/api\/v1\/sandboxes\?limit=10&after=[^>]+&id_prefix=sb-seed->; rel="next"$/);
      expect(raw.headers.get('access-control-expose-headers')).toContain('Link');
      seen.push(...page.items.map((s) => s.id));
      // The last row of the page goes away: its cursor still continues the walk.
      const gone = page.items.at(-1)!.id;
      await call(srv.url, 'DELETE', `/api/v1/sandboxes/${gone}`, undefined, { 'x-admin-api-key': ADMIN });
      while (page.next) {
        page = await alice.listPage({ limit: 10, after: page.next, id_prefix: 'sb-seed-' });
        seen.push(...page.items.map((s) => s.id));
      }
      // Alice's 37 and the 2,000 unowned (visible to all) — minus none: the deleted one was seen before it went.
      expect(seen.filter((id) => id.startsWith('sb-seed-bob'))).toEqual([]);
      expect(seen.filter((id) => id.startsWith('sb-seed-alice'))).toHaveLength(37);
      expect(new Set(seen).size).toBe(seen.length);
      expect(seen.length).toBe(37 + 2_000);
      // The typed client's walk and `sbx ls` agree with it (the destroyed one is gone now).
      let n = 0;
      for await (const s of alice.listAll({ id_prefix: 'sb-seed-alice', pageSize: 7 })) n += s.owner_id === 'alice' ? 1 : 0;
      expect(n).toBe(gone.startsWith('sb-seed-alice') ? 36 : 37);
      const cli = fakeCli({ url: srv.url, user: 'bob', json: true });
      expect(await runCommand(lsCommand, cli.ctx, {})).toBe(0);
      const listed = JSON.parse(cli.stdout()) as Array<{ id: string }>;
      expect(listed.filter((s) => s.id.startsWith('sb-seed-bob'))).toHaveLength(5);
      expect(listed.filter((s) => s.id.startsWith('sb-seed-alice'))).toHaveLength(0);
      await cli.close();
      await alice.close();
    }, 60_000);

    it('refuses bad limits and cursors with 400 and a clear message', async () => {
      for (const q of ['limit=0', 'limit=-1', 'limit=1001', 'limit=abc']) {
        const r = await call(srv.url, 'GET', `/api/v1/sandboxes?${q}`);
        expect(r.status, q).toBe(400);
        expect(r.body.message, q).toMatch(/limit/);
      }
      expect((await call(srv.url, 'GET', '/api/v1/sandboxes?after=abc')).body.message).toMatch(/after needs limit/);
      const first = await fetch(`${srv.url}/api/v1/sandboxes?limit=1`);
      const cursor = new URLSearchParams(/<[^?]*\?([^>]*)>/.exec(first.headers.get('link')!)![1]!).get('after')!;
      const [payload, mac] = cursor.split('.');
      const forged = `${Buffer.from(JSON.stringify(['1970-01-01T00:00:00.000Z', 'sb-'])).toString('base64url')}.${mac}`;
      for (const bad of ['nonsense', `${payload}.AAAA`, forged, `${payload}`, '.x']) {
        const r = await call(srv.url, 'GET', `/api/v1/sandboxes?limit=5&after=${encodeURIComponent(bad)}`);
        expect(r.status, bad).toBe(400);
        expect(r.body.message).toMatch(/not a cursor this server issued/);
      }
      // A cursor of another installation (another secret) is refused the same way.
      const other = await startTestServer();
      try {
        for (let i = 0; i < 2; i++) await call(other.url, 'POST', '/api/v1/sandboxes', {});
        const foreign = await fetch(`${other.url}/api/v1/sandboxes?limit=1`);
        const foreignCursor = new URLSearchParams(/<[^?]*\?([^>]*)>/.exec(foreign.headers.get('link')!)![1]!).get('after')!;
        expect((await call(srv.url, 'GET', `/api/v1/sandboxes?limit=5&after=${encodeURIComponent(foreignCursor)}`)).status).toBe(400);
      } finally {
        await other.close();
      }
    });
  });
}

scaleSuite('sqlite', async () => ({}));

const schema = `sbx_scale_${randomBytes(6).toString('hex')}`;
scaleSuite(
  'postgres',
  async () => {
    await sql(`CREATE SCHEMA "${schema}"`);
    return { driver: 'postgres', dsn: dsnInSchema(schema) };
  },
  () => (DSN ? sql(`DROP SCHEMA "${schema}" CASCADE`) : Promise.resolve()),
  DSN ? undefined : 'SBX_TEST_POSTGRES_DSN is not set (scripts/test-postgres-up.sh prints one)',
);
