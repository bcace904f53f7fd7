/**
 * Replicas in one process on one PostgreSQL schema (DESIGN §7 "Replicas"): a queued spawn on one
 * replica wakes when capacity is freed on another; replica and leader leases are the control
 * plane's alone; a second local worker is refused; event ids mean the same on every replica.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { POSTGRES_DSN, dsnInSchema, sql } from '../helpers/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openSse } from '../helpers/sse.js';
import { startTestWorker } from '../helpers/worker.js';

const SCHEMA = 'sbx_replicas_shared';
const TOKEN = 'replicas-shared-token-0123456789abcdef';
const dsn = dsnInSchema(SCHEMA);

let a: TestServer;
let b: TestServer;
let worker: Worker;
let dir: string;

const plane = (id: string, extra: Record<string, unknown> = {}) =>
  startTestServer({
    server: { local_worker: false, replica_id: id, leader_ttl: '2s' },
    database: { driver: 'postgres', dsn },
    auth: { worker_token: TOKEN },
    defaults: { max_sandboxes: 1, spawn_overflow: 'queue', spawn_queue_timeout: '20s' },
    ...extra,
  });

describe.skipIf(!POSTGRES_DSN)('replicas in one process on one schema', () => {
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-replicas-'));
    await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`);
    a = await plane('pa');
    b = await plane('pb');
    worker = await startTestWorker(dir, { id: 'w1', controlPlane: `${a.url},${b.url}`, auth: { worker_token: TOKEN } });
  }, 60_000);

  afterAll(async () => {
    await worker?.stop();
    await a?.close();
    await b?.close();
    rmSync(dir, { recursive: true, force: true });
    if (POSTGRES_DSN) await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  });

  it('a spawn queued on one replica is admitted when a sandbox is destroyed through another', async () => {
    const first = await call(a.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    expect(first.status).toBe(201);
    const started = Date.now();
    const queued = call(b.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    // Still waiting: the cap of 1 holds across both replicas.
    await new Promise((r) => setTimeout(r, 1500));
    const diag = await call(b.url, 'GET', '/api/v1/admin/diagnostics');
    expect(diag.body.scheduler.spawn_queue_depth).toBe(1);
    expect((await call(a.url, 'DELETE', `/api/v1/sandboxes/${first.body.id}`)).status).toBe(200);
    const second = await queued;
    expect(second.status).toBe(201);
    expect(Date.now() - started).toBeLessThan(15_000);
    await call(a.url, 'DELETE', `/api/v1/sandboxes/${second.body.id}`);
  });

  it('event ids are the journal ids on both replicas, and a replay by id works on either', async () => {
    const sa = await openSse(`${a.url}/api/v1/events?types=sandbox.created`);
    const sb = await openSse(`${b.url}/api/v1/events?types=sandbox.created`);
    const made = await call(b.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    const has = (f: Array<{ data?: string }>) => f.some((x) => x.data?.includes(made.body.id));
    const [fa, fb] = await Promise.all([sa.until(has, 10_000), sb.until(has, 10_000)]);
    const idOf = (f: Array<{ id?: string; data?: string }>) => f.find((x) => x.data?.includes(made.body.id))!.id;
    expect(idOf(fa)).toBe(idOf(fb));
    sa.close();
    sb.close();
    // Replay from just before it, on the other replica: it comes again with the same id.
    const replay = await openSse(`${a.url}/api/v1/events?types=sandbox.created`, { 'last-event-id': String(Number(idOf(fb)) - 1) });
    const fr = await replay.until(has, 10_000);
    expect(idOf(fr)).toBe(idOf(fb));
    replay.close();
    await call(a.url, 'DELETE', `/api/v1/sandboxes/${made.body.id}`);
  });

  it('one Idempotency-Key sent to both replicas at once makes one sandbox', async () => {
    const tries = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call([a, b][i % 2]!.url, 'POST', '/api/v1/sandboxes', { ttl: '10m', metadata: { idem: 'x' } }, { 'Idempotency-Key': 'across' }),
      ),
    );
    expect(tries.map((r) => r.status)).toEqual(Array(6).fill(201));
    expect(new Set(tries.map((r) => r.body.id)).size).toBe(1);
    await call(a.url, 'DELETE', `/api/v1/sandboxes/${tries[0]!.body.id}`);
  });

  it('a template created through both replicas at once has exactly one winner', async () => {
    const tries = await Promise.all(
      Array.from({ length: 10 }, (_, i) => call([a, b][i % 2]!.url, 'POST', '/api/v1/templates', { name: 'raced', image: `img-${i}` })),
    );
    expect(tries.filter((r) => r.status === 201)).toHaveLength(1);
    expect(new Set(tries.filter((r) => r.status !== 201).map((r) => `${r.status} ${r.body.code}`))).toEqual(new Set(['409 conflict']));
    const seen = await Promise.all([a, b].map((s) => call(s.url, 'GET', '/api/v1/templates/raced')));
    expect(seen[0]!.body).toEqual(seen[1]!.body);
  });

  it('a worker cannot renew a replica or leader lease, whatever its id', async () => {
    for (const resource of ['leader:reaper', 'replica:pa', 'local-worker']) {
      const r = await call(
        a.url,
        'POST',
        `/api/v1/worker/w1/leases/${encodeURIComponent(resource)}/renew`,
        { ttl: '1m' },
        { 'x-worker-id': 'w1', 'x-worker-token': TOKEN },
      );
      expect(r.status).toBe(403);
      expect(r.body.code).toBe('forbidden');
    }
  });

  it('only one replica may run the local worker on one database', async () => {
    const local = await startTestServer({ server: { replica_id: 'pl' }, database: { driver: 'postgres', dsn } });
    try {
      await expect(startTestServer({ server: { replica_id: 'pm' }, database: { driver: 'postgres', dsn } })).rejects.toThrow(
        /replica pl already runs the local worker.*server\.local_worker: false/,
      );
    } finally {
      await local.close();
    }
    // Given back on a clean stop: the next one may take it.
    const next = await startTestServer({ server: { replica_id: 'pm' }, database: { driver: 'postgres', dsn } });
    await next.close();
  });

  it('diagnostics name this replica, the live ones and the leaders', async () => {
    const d = (await call(b.url, 'GET', '/api/v1/admin/diagnostics')).body;
    expect(d.replica).toMatchObject({ id: 'pb', shared: true, live: ['pa', 'pb'] });
    expect(d.replica.journal).toMatchObject({ outbox: 0, dropped: 0 });
    expect(['pa', 'pb']).toContain(d.leaders.reaper);
    expect('warm' in d.leaders).toBe(false);
  });

  it('a bad replica id is a start-up error', async () => {
    await expect(plane('bad id with spaces')).rejects.toThrow(/server\.replica_id must be/);
  });
});
