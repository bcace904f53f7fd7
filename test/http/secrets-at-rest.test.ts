/**
 * Secrets at rest (DESIGN.md §15) with real servers on real stores: the value is in neither the
 * SQLite files nor a pg_dump; a lone SQLite node generates its key into the data dir (0600) and
 * keeps using it across restarts; a process with another key refuses to start with a one-line
 * error (SQLite and PostgreSQL replicas alike); on PostgreSQL without a key a create answers 503
 * naming the setting, and once a secret exists a replica without the key refuses to start.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { POSTGRES_DSN, dsnInSchema, sql } from '../helpers/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const VALUE = 'at-rest-canary-3f9a1c7e5b2d';
const KEY_A = 'a'.repeat(16) + '0123456789abcdef0123456789abcdef';
const KEY_B = 'b'.repeat(16) + '0123456789abcdef0123456789abcdef';
const secret = { name: 'CANARY', value: VALUE, hosts: ['api.example.com'] };

/** Every byte under `dir` (the database, its WAL and journal files), as latin1 text to search. */
function bytesUnder(dir: string): string {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => readFileSync(join(e.parentPath, e.name)).toString('latin1'))
    .join('\n');
}

describe('a lone SQLite node', () => {
  let dataDir: string;
  let srv: TestServer | undefined;
  const start = (auth: Record<string, unknown> = {}) =>
    startTestServer({ database: { driver: 'sqlite', path: join(dataDir, 'sbx.db') }, auth });

  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'sbx-secrets-sqlite-'));
  });
  afterAll(async () => {
    await srv?.close().catch(() => undefined);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('generates its key into the data dir (0600) and keeps the value only encrypted', async () => {
    srv = await start();
    const keyFile = join(dataDir, 'secrets.key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(readFileSync(keyFile, 'utf8').trim()).toMatch(/^[0-9a-f]{64}$/);
    const made = await call(srv.url, 'POST', '/api/v1/secrets', secret, { 'x-user-id': 'alice' });
    expect(made.status, made.text).toBe(201);
    const rotated = await call(srv.url, 'PUT', '/api/v1/secrets/CANARY', { value: `${VALUE}-2` }, { 'x-user-id': 'alice' });
    expect(rotated.status).toBe(200);
    // The stored row exists, and no file of the store holds the value (nor the rotated one).
    const row = await srv.plane.deps.store.getSecret('alice', 'CANARY');
    expect(row?.ciphertext).toMatch(/^v1:/);
    const bytes = bytesUnder(dataDir);
    expect(bytes).toContain('CANARY');
    expect(bytes).not.toContain(VALUE);
    await srv.close();
    srv = undefined;
  });

  it('restarts with the same key file; another key refuses to start with one line', async () => {
    const keyBefore = readFileSync(join(dataDir, 'secrets.key'), 'utf8');
    srv = await start();
    expect(readFileSync(join(dataDir, 'secrets.key'), 'utf8')).toBe(keyBefore);
    expect((await call(srv.url, 'GET', '/api/v1/secrets/CANARY', undefined, { 'x-user-id': 'alice' })).status).toBe(200);
    await srv.close();
    srv = undefined;
    const err = await start({ secrets_key: KEY_A }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/auth\.secrets_key is not the key this installation's secrets are encrypted with/);
    expect(err?.message).not.toContain('\n');
    expect(err?.message).not.toContain(KEY_A);
  });

  it('refuses a configured key that is too short', async () => {
    const err = await startTestServer({ auth: { secrets_key: 'short' } }).then(
      () => null,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/at least 32 characters/);
    expect(err?.message).not.toContain('short');
  });
});

describe.skipIf(!POSTGRES_DSN)('PostgreSQL replicas', () => {
  const SCHEMA = 'sbx_secrets_at_rest';
  const dsn = dsnInSchema(SCHEMA);
  const servers: TestServer[] = [];
  const replica = async (id: string, auth: Record<string, unknown>) => {
    const s = await startTestServer({ server: { local_worker: false, replica_id: id }, database: { driver: 'postgres', dsn }, auth });
    servers.push(s);
    return s;
  };
  const refused = (id: string, auth: Record<string, unknown>) =>
    replica(id, auth).then(
      () => null,
      (e: Error) => e,
    );

  beforeAll(async () => {
    await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`);
  });
  afterAll(async () => {
    for (const s of servers) await s.close().catch(() => undefined);
    if (POSTGRES_DSN) await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  });

  it('without a key: a create is 503 naming auth.secrets_key, nothing stored', async () => {
    const bare = await replica('p0', {});
    const res = await call(bare.url, 'POST', '/api/v1/secrets', secret, { 'x-user-id': 'alice' });
    expect(res.status).toBe(503);
    expect(res.body.code).toBe('unavailable');
    expect(res.body.message).toMatch(/auth\.secrets_key/);
    expect(res.text).not.toContain(VALUE);
    expect((await call(bare.url, 'GET', '/api/v1/secrets', undefined, { 'x-user-id': 'alice' })).body).toEqual([]);
    await bare.close();
    servers.splice(servers.indexOf(bare), 1);
  });

  it('with the shared key: the value is absent from a pg_dump; another replica reads it', async () => {
    const a = await replica('pa', { secrets_key: KEY_A });
    const b = await replica('pb', { secrets_key: KEY_A });
    expect((await call(a.url, 'POST', '/api/v1/secrets', secret, { 'x-user-id': 'alice' })).status).toBe(201);
    const seen = await call(b.url, 'GET', '/api/v1/secrets/CANARY', undefined, { 'x-user-id': 'alice' });
    expect(seen.status).toBe(200);
    const dump = execFileSync('pg_dump', ['--schema', SCHEMA, '--data-only', POSTGRES_DSN], { encoding: 'latin1', maxBuffer: 64 << 20 });
    expect(dump).toContain('CANARY');
    expect(dump).toContain('v1:');
    expect(dump).not.toContain(VALUE);
  });

  it('a replica with a wrong key, or none once a secret exists, refuses to start with one line', async () => {
    const wrong = await refused('pc', { secrets_key: KEY_B });
    expect(wrong?.message).toMatch(/auth\.secrets_key is not the key/);
    expect(wrong?.message).not.toContain('\n');
    expect(wrong?.message).not.toContain(KEY_B);
    const none = await refused('pd', {});
    expect(none?.message).toMatch(/secrets exist in the store but auth\.secrets_key/);
    expect(none?.message).not.toContain('\n');
  });
});
