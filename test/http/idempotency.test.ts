/**
 * Idempotent spawns (DESIGN.md §10): `Idempotency-Key` on POST /api/v1/sandboxes and template
 * spawns, against a real server and SQLite file; a restart on the same file keeps the keys.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/index.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let dir: string;
let server: TestServer;
const dbPath = () => join(dir, 'keys.db');
const start = () => startTestServer({ database: { driver: 'sqlite', path: dbPath() }, defaults: { max_ttl: '1h' } });
const spawn = (body: Record<string, unknown>, key?: string, base = server.url) =>
  call(base, 'POST', '/api/v1/sandboxes', body, key === undefined ? {} : { 'Idempotency-Key': key });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-idem-'));
  server = await start();
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('Idempotency-Key on spawn', () => {
  it('20 concurrent spawns with one key make one sandbox; the others are replays of it', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, () =>
        call(server.url, 'POST', '/api/v1/sandboxes', { ttl: '10m', metadata: { job: '7' } }, { 'Idempotency-Key': 'job-7' }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(20).fill(201));
    const ids = new Set(results.map((r) => r.body.id));
    expect(ids.size).toBe(1);
    const replayed = results.filter((r) => r.headers.get('idempotent-replayed') === 'true');
    expect(replayed).toHaveLength(19);
    const live = (await call(server.url, 'GET', '/api/v1/sandboxes')).body as Array<{ id: string; metadata: Record<string, string> }>;
    expect(live.filter((s) => s.metadata.job === '7')).toHaveLength(1);
  });

  it('the same key with another request is a conflict; another owner has keys of its own', async () => {
    const first = await spawn({ ttl: '10m', owner_id: 'alice' }, 'k-1');
    expect(first.status).toBe(201);
    const other = await spawn({ ttl: '20m', owner_id: 'alice' }, 'k-1');
    expect(other.status).toBe(409);
    expect(other.body).toEqual({ code: 'conflict', message: 'Idempotency-Key "k-1" was already used with a different request' });
    // The same JSON with its keys in another order is the same request.
    expect((await spawn({ owner_id: 'alice', ttl: '10m' }, 'k-1')).body.id).toBe(first.body.id);
    const bob = await spawn({ ttl: '10m', owner_id: 'bob' }, 'k-1');
    expect(bob.status).toBe(201);
    expect(bob.body.id).not.toBe(first.body.id);
  });

  it('a spawn that fails lets go of its key: the retry is judged afresh', async () => {
    const refused = await spawn({ ttl: '2h' }, 'too-long-ttl');
    expect(refused.status).toBe(429);
    const again = await spawn({ ttl: '2h' }, 'too-long-ttl');
    expect(again.status).toBe(429);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
  });

  it('a bad key is a 400 and creates nothing', async () => {
    const before = (await call(server.url, 'GET', '/api/v1/sandboxes')).body.length;
    // (fetch strips blanks at either end itself; the unit of the rule is parseIdempotencyKey.)
    for (const key of ['x'.repeat(129), 'tab\there', 'ünï']) {
      const r = await spawn({ ttl: '10m' }, key);
      expect(r.status, JSON.stringify(key)).toBe(400);
      expect(r.body.code).toBe('bad_request');
      expect(r.body.message).toMatch(/Idempotency-Key must be 1 to 128 printable ASCII characters/);
    }
    expect((await call(server.url, 'GET', '/api/v1/sandboxes')).body.length).toBe(before);
    expect((await spawn({ ttl: '10m' }, 'x'.repeat(128))).status).toBe(201);
  });

  it('template spawns take keys too, apart from plain spawns with the same key', async () => {
    expect((await call(server.url, 'POST', '/api/v1/templates', { name: 'idem', ttl: '10m' })).status).toBe(201);
    const a = await call(server.url, 'POST', '/api/v1/templates/idem/spawn', {}, { 'Idempotency-Key': 'tpl' });
    const b = await call(server.url, 'POST', '/api/v1/templates/idem/spawn', {}, { 'Idempotency-Key': 'tpl' });
    expect([a.status, b.status]).toEqual([201, 201]);
    expect(b.body.id).toBe(a.body.id);
    expect(b.headers.get('idempotent-replayed')).toBe('true');
    // The same key on the plain spawn route is a different request.
    expect((await spawn({}, 'tpl')).status).toBe(409);
  });

  it('the typed client sends the key; a restart on the same database keeps it', async () => {
    const client = new Client({ url: server.url });
    const first = await client.spawn({ ttl: '10m' }, { idempotencyKey: 'restart-me' });
    expect((await client.spawn({ ttl: '10m' }, { idempotencyKey: 'restart-me' })).id).toBe(first.id);
    await client.close();
    await server.close();
    server = await start();
    const again = await spawn({ ttl: '10m' }, 'restart-me');
    expect(again.status).toBe(201);
    expect(again.body.id).toBe(first.id);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});
