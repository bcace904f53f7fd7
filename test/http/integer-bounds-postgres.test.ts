import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { dsnInSchema, POSTGRES_DSN, sql } from '../helpers/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const DSN = POSTGRES_DSN;
const SKIP = DSN ? undefined : 'SBX_TEST_POSTGRES_DSN is not set (scripts/test-postgres-up.sh prints one)';
const MAX = 2_147_483_647;

describe.skipIf(SKIP !== undefined)(`integer bounds against PostgreSQL INTEGER columns${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  const schema = `sbx_test_${randomBytes(6).toString('hex')}`;
  let srv: TestServer;
  beforeAll(async () => {
    await sql(`CREATE SCHEMA "${schema}"`);
    // The control plane has no schema setting; the connection's search_path puts it in a fresh one.
    const dsn = dsnInSchema(schema);
    srv = await startTestServer({ database: { driver: 'postgres', dsn } });
  });
  afterAll(async () => {
    await srv?.close();
    await sql(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  });

  it('stores the largest accepted values and refuses larger ones with 400, not a store 500', async () => {
    const put = await call(srv.url, 'PUT', '/api/v1/quotas/big', { max_sandboxes: MAX, max_ttl: '8760h' });
    expect(put.status).toBe(200);
    expect((await call(srv.url, 'GET', '/api/v1/quotas/big')).body).toMatchObject({ max_sandboxes: MAX, max_ttl: '8760h0m0s' });
    const over = await call(srv.url, 'PUT', '/api/v1/quotas/big', { max_sandboxes: MAX + 1 });
    expect(over.status).toBe(400);
    expect(over.body.code).toBe('bad_request');
    expect((await call(srv.url, 'PUT', '/api/v1/quotas/big', { max_ttl: '100000000000h' })).status).toBe(400);

    const sb = await call(srv.url, 'POST', '/api/v1/sandboxes', { memory_mb: MAX, vcpus: MAX, ttl: '1m' });
    expect(sb.status).toBe(201);
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${sb.body.id}`)).body).toMatchObject({ memory_mb: MAX, vcpus: MAX });
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', { memory_mb: MAX + 1 })).status).toBe(400);
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${sb.body.id}`)).status).toBe(200);
  });

  it('the bound is needed: the store itself cannot hold one more', async () => {
    const err = await srv.plane.deps.store
      .upsertQuota({
        owner_id: 'over',
        max_sandboxes: MAX + 1,
        max_ttl_ms: 0,
        max_exec_timeout_ms: 0,
        updated_at: new Date().toISOString(),
      })
      .then(
        () => null,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(Error);
  });
});
