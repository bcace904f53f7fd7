/**
 * Replicas in one process on one PostgreSQL schema (DESIGN §7 "Replicas"): a queued spawn on one
 * replica wakes when capacity is freed on another; replica and leader leases are the control
 * plane's alone; event ids mean the same on every replica. Then two replicas that run sandboxes
 * themselves (DESIGN §7): each its own worker, any one serves any sandbox over the replica RPC, and
 * replica tokens and worker credentials are each refused where the other belongs.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { POSTGRES_DSN, dsnInSchema, sql } from '../helpers/postgres.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openSse } from '../helpers/sse.js';
import { openWs, stdoutOf } from '../helpers/ws.js';
import { waitFor } from '../helpers/wait.js';
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
    // Queued: the cap of 1 holds across both replicas.
    const depth = async () => (await call(b.url, 'GET', '/api/v1/admin/diagnostics')).body.scheduler.spawn_queue_depth;
    await waitFor('the spawn is queued on b', async () => (await depth()) === 1);
    expect(await depth()).toBe(1);
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

const API_KEY = 'replicas-local-api-key-0123456789abcdef';
const WORKER_KEY = 'replicas-local-worker-signing-key-0123456789';

describe.skipIf(!POSTGRES_DSN)('replicas that run sandboxes themselves, in one process on one schema', () => {
  const LOCAL_SCHEMA = 'sbx_replicas_local';
  const ldsn = dsnInSchema(LOCAL_SCHEMA);
  let la: TestServer;
  let lb: TestServer;
  let root: string;
  const key = { 'x-api-key': API_KEY };
  const replica = (id: string) =>
    startTestServer({
      server: { replica_id: id, leader_ttl: '2s' },
      database: { driver: 'postgres', dsn: ldsn },
      // One mock root for both, as on one host: each cleans up only its own runtimes.
      providers: { mock: { root_dir: root } },
      auth: { api_key: API_KEY, worker_token: TOKEN, worker_signing_key: WORKER_KEY },
    });

  beforeAll(async () => {
    // Its marker directory sits beside it, inside this temp directory too.
    root = join(mkdtempSync(join(tmpdir(), 'sbx-replicas-root-')), 'mock');
    await sql(`DROP SCHEMA IF EXISTS ${LOCAL_SCHEMA} CASCADE; CREATE SCHEMA ${LOCAL_SCHEMA}`);
    la = await replica('la');
    lb = await replica('lb');
  }, 60_000);

  afterAll(async () => {
    await la?.close();
    await lb?.close();
    rmSync(dirname(root), { recursive: true, force: true });
    if (POSTGRES_DSN) await sql(`DROP SCHEMA IF EXISTS ${LOCAL_SCHEMA} CASCADE`);
  });

  it('both start with no extra setting, each registered under its id with its own /rpc', async () => {
    const ws = (await call(la.url, 'GET', '/api/v1/workers', undefined, key)).body as Array<{
      id: string;
      capabilities: string[];
      capacity: { rpc_url?: string };
    }>;
    const byId = new Map(ws.map((w) => [w.id, w]));
    expect(byId.get('la')?.capacity.rpc_url).toBe(la.url);
    expect(byId.get('lb')?.capacity.rpc_url).toBe(lb.url);
    expect(byId.get('lb')?.capabilities).toContain('replica');
    expect(byId.has('local')).toBe(false);
  });

  it('a sandbox run by one replica is served through the other: GET, exec, a file round trip, destroy', async () => {
    const made = await call(lb.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' }, key);
    expect(made.status).toBe(201);
    // Ties go to the replica that took the spawn.
    expect(made.body.worker_id).toBe('lb');
    const id = made.body.id as string;
    expect((await call(la.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, key)).body.worker_id).toBe('lb');
    const ex = await call(la.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo via-$((40+2)); echo err >&2; exit 3' }, key);
    expect(ex.body).toMatchObject({ exit_code: 3, stdout: 'via-42\n', stderr: 'err\n' });
    const body = Buffer.from('forwarded bytes \u00e9\n');
    const put = await fetch(`${la.url}/api/v1/sandboxes/${id}/files?path=/tmp/f.txt`, {
      method: 'POST',
      headers: { ...key, 'content-type': 'application/octet-stream' },
      body,
    });
    expect(put.status).toBeLessThan(300);
    // Written through A, read back through B (the runtime's own replica) and through A.
    for (const s of [lb, la]) {
      const got = await call(s.url, 'GET', `/api/v1/sandboxes/${id}/files?path=/tmp/f.txt`, undefined, key);
      expect(got.status).toBe(200);
      expect(got.text).toBe(body.toString('utf8'));
    }
    // Interactive exec (live stdin) through A: A's socket is bridged to B's /rpc/exec/ws.
    const ws = await openWs(la.url, `/api/v1/sandboxes/${id}/exec/ws`, key);
    ws.send({ command: 'cat', mode: 'argv' });
    ws.send({ type: 'stdin', data: 'live through la\n' });
    ws.send({ type: 'stdin_eof' });
    const msgs = await ws.rest();
    expect(stdoutOf(msgs)).toBe('live through la\n');
    expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
    expect((await call(la.url, 'DELETE', `/api/v1/sandboxes/${id}`, undefined, key)).status).toBe(200);
    expect((await call(lb.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, key)).status).toBe(404);
  });

  it("a replica's /rpc takes replica tokens only; a replica token is refused by the API and the worker routes", async () => {
    const { replicaToken } = await import('../../src/transports/worker-rpc/client/credentials.js');
    const { mintWorkerToken } = await import('../../src/transports/shared/worker-auth.js');
    const installationKey = (await la.plane.deps.store.getMeta('replica_rpc_key'))!;
    expect(installationKey).toMatch(/^[0-9a-f]{64}$/);
    const status = { id: 's', method: 'worker.status', worker_id: 'la', params: { sandbox_id: 'sb-x', provider: 'mock', runtime_id: 'r' } };
    const rpc = (headers: Record<string, string>) => call(la.url, 'POST', '/rpc', status, headers);
    const good = replicaToken(installationKey, 'la', new Date());
    const ok = await rpc({ 'x-worker-id': 'la', 'x-worker-token': good });
    expect(ok.status).toBe(200);
    expect(ok.body.result.state).toBe('destroyed');
    // An sbx worker's credentials, however minted, cannot drive a replica.
    for (const token of [
      TOKEN,
      mintWorkerToken(WORKER_KEY, { worker_id: 'la', aud: 'worker:rpc' }),
      mintWorkerToken(WORKER_KEY, { worker_id: 'la', aud: 'replica:rpc' }),
    ]) {
      const r = await rpc({ 'x-worker-id': 'la', 'x-worker-token': token });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe('unauthorized');
    }
    expect((await rpc(key)).status).toBe(401);
    expect((await rpc({})).status).toBe(401);
    // Path-routed previews on /rpc/preview (before the API's router) take the same replica token only.
    const refused: Array<Record<string, string>> = [{ 'x-worker-id': 'la', 'x-worker-token': TOKEN }, key, {}];
    for (const headers of refused) {
      const p = await call(la.url, 'GET', '/rpc/preview/sb-x/8080/', undefined, headers);
      expect(p.status).toBe(401);
    }
    const viaToken = await call(la.url, 'GET', '/rpc/preview/sb-x/8080/', undefined, { 'x-worker-id': 'la', 'x-worker-token': good });
    expect(viaToken.status).toBe(404);
    // A token for the other replica is not this one's.
    expect((await rpc({ 'x-worker-id': 'lb', 'x-worker-token': replicaToken(installationKey, 'lb', new Date()) })).status).toBe(403);
    // A replica token is no API key and no worker credential.
    expect((await call(la.url, 'GET', '/api/v1/sandboxes', undefined, { 'x-api-key': good })).status).toBe(401);
    expect(
      (await call(la.url, 'POST', '/api/v1/worker/la/heartbeat', { hostname: 'x' }, { 'x-worker-id': 'la', 'x-worker-token': good }))
        .status,
    ).toBe(401);
    // An sbx worker with a valid credential cannot heartbeat as a replica's worker, nor claim to be one.
    const asReplica = await call(
      la.url,
      'POST',
      '/api/v1/worker/lb/heartbeat',
      { hostname: 'x' },
      { 'x-worker-id': 'lb', 'x-worker-token': TOKEN },
    );
    expect(asReplica.status).toBe(403);
    const claim = await call(
      la.url,
      'POST',
      '/api/v1/worker/w9/heartbeat',
      { hostname: 'x', capabilities: ['replica'] },
      { 'x-worker-id': 'w9', 'x-worker-token': TOKEN },
    );
    expect(claim.status).toBe(403);
  });

  it('pool mode is refused at start while a live replica on another host runs sandboxes on the database', async () => {
    const store = la.plane.deps.store;
    const now = new Date().toISOString();
    // A replica "far" on another machine: its worker row and its live replica lease.
    await store.upsertWorker({
      id: 'far',
      hostname: 'another-host.example',
      status: 'online',
      providers: ['mock'],
      capabilities: ['replica'],
      capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0, rpc_url: 'http://192.0.2.1:7423' },
      last_heartbeat: now,
      updated_at: now,
    });
    await store.acquireLease('replica:far', 'far', 60_000, new Date());
    const pooled = () =>
      startTestServer({
        server: { replica_id: 'lp', leader_ttl: '2s' },
        database: { driver: 'postgres', dsn: ldsn },
        providers: { mock: { root_dir: root } },
        pool: { enabled: true },
        auth: { api_key: API_KEY },
      });
    await expect(pooled()).rejects.toThrow(
      /pool mode across replicas on several hosts is not supported: replica far runs on another-host\.example/,
    );
    // Once that replica is gone (its lease lapsed or given back), the pool may start on this host.
    await store.releaseLease('replica:far', 'far');
    const ok = await pooled();
    await ok.close();
    await store.deleteWorker('far');
    await store.deleteWorker('lp');
  });

  it('the replica route table: /rpc is in its realm, nothing but the dashboard files is outside one', async () => {
    const { routeTable } = await import('../../src/transports/http/route-table.js');
    const routes = routeTable(la.plane.app);
    expect(routes.filter((r) => r.url.startsWith('/rpc')).map((r) => r.realm)).toEqual(expect.arrayContaining(['rpc']));
    expect(routes.filter((r) => r.url.startsWith('/rpc')).every((r) => r.realm === 'rpc')).toBe(true);
    const outside = routes.filter((r) => r.realm === 'outside').map((r) => `${r.method} ${r.url}`);
    expect(outside.every((r) => /^GET \/ui(\/\*)?$/.test(r))).toBe(true);
  });
});
