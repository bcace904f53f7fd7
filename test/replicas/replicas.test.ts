/**
 * Control-plane replicas on one PostgreSQL (issue 15 and 31, DESIGN §7 "Replicas"): three real
 * `sbx serve` processes on a PostgreSQL server of this suite's own, each running sandboxes itself
 * (mock sharing one `providers.mock.root_dir`, as on one host; docker on one engine where
 * SBX_TEST_DOCKER=1), plus one real `sbx worker` heartbeating to all three. Admission, events,
 * leader tasks, forwarding through a replica that does not run the sandbox, a replica killed with
 * -9 and brought back, and a database outage.
 */
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from 'node:net';
import { call } from '../helpers/http.js';
import { pgClusterUnavailable, startPgCluster, type PgCluster } from '../helpers/pg-cluster.js';
import { hostRequest } from '../helpers/preview.js';
import { startSbx, type Proc } from '../helpers/procs.js';
import { openSse } from '../helpers/sse.js';
import { tempDir } from '../helpers/tmp.js';

const why = pgClusterUnavailable();
const TOKEN = 'replica-suite-worker-token-0123456789';
const LEADER_TTL_MS = 3_000;
const PREVIEW_DOMAIN = 'replicas.preview.test';
const DOCKER = process.env.SBX_TEST_DOCKER === '1';
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';

describe.each(DOCKER ? ['mock', 'docker'] : ['mock'])('replicas with local %s providers on one PostgreSQL', (provider) => {
  // Fewer on docker: every admitted spawn is a container on the one engine.
  const CAP = provider === 'docker' ? 12 : 50;
  let cluster: PgCluster;
  let dir: string;
  const replicas: Record<string, Proc> = {};
  let worker: Proc;

  const url = (name: string) => replicas[name]!.ready;
  const names = () => Object.keys(replicas).filter((n) => replicas[n]!.alive());

  function startReplica(name: string): Promise<Proc> {
    return startSbx(
      join(dir, name),
      ['serve', '--port', '0'],
      {
        SVC_DATABASE_DRIVER: 'postgres',
        SVC_DATABASE_DSN: cluster.dsn,
        // Local providers on every replica, with no extra setting: one mock root (or one engine) for all.
        SVC_PROVIDERS_DEFAULT: provider,
        SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'mock'),
        SVC_DEFAULTS_IMAGE: provider === 'docker' ? IMAGE : 'debian:bookworm-slim',
        SVC_SERVER_PREVIEW_DOMAIN: PREVIEW_DOMAIN,
        SVC_SERVER_RECONCILE_INTERVAL: '1s',
        SVC_SERVER_REPLICA_ID: name,
        SVC_SERVER_LEADER_TTL: `${LEADER_TTL_MS / 1000}s`,
        SVC_SERVER_REAPER_INTERVAL: '1s',
        SVC_AUTH_WORKER_TOKEN: TOKEN,
        SVC_DEFAULTS_MAX_SANDBOXES: String(CAP),
      },
      /listening on (http:\/\/127\.0\.0\.1:\d+)/,
    );
  }

  /** busybox httpd serving /workspace/www of a sandbox through a streamed exec, until aborted. */
  function httpdIn(base: string, id: string, listen: string): AbortController {
    const stop = new AbortController();
    void fetch(`${base}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: `exec busybox httpd -f -p ${listen} -h .`, workdir: '/workspace/www', stream: true }),
      signal: stop.signal,
    }).catch(() => undefined);
    return stop;
  }

  /** A TCP port nobody listens on now. */
  function freePort(): Promise<number> {
    return new Promise((resolve, reject) => {
      const srv = createServer();
      srv.once('error', reject);
      srv.listen(0, '127.0.0.1', () => {
        const port = (srv.address() as { port: number }).port;
        srv.close(() => resolve(port));
      });
    });
  }

  async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 20_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const v = await fn().catch(() => undefined);
      if (v !== undefined && v !== false) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function journal(afterId: number): Promise<Array<{ id: number; type: string; sandbox_id?: string }>> {
    const c = new pg.Client({ connectionString: cluster.dsn });
    await c.connect();
    try {
      const r = await c.query('SELECT id, body FROM events WHERE id > $1 ORDER BY id', [afterId]);
      return r.rows.map((row) => ({ ...JSON.parse(row.body), id: Number(row.id) }));
    } finally {
      await c.end();
    }
  }

  const spawn = (name: string, body: Record<string, unknown> = { ttl: '10m' }) => call(url(name), 'POST', '/api/v1/sandboxes', body);
  const diagnostics = async (name: string) => (await call(url(name), 'GET', '/api/v1/admin/diagnostics')).body;

  describe.skipIf(why !== null)('three replicas', () => {
    beforeAll(async () => {
      dir = tempDir('replicas');
      cluster = await startPgCluster();
      for (const name of ['ra', 'rb', 'rc']) replicas[name] = await startReplica(name);
      worker = await startSbx(
        join(dir, 'w1'),
        [
          'worker',
          '--id',
          'w1',
          '--control-plane',
          ['ra', 'rb', 'rc'].map(url).join(','),
          '--listen',
          '127.0.0.1:0',
          '--heartbeat-interval',
          '1s',
        ],
        { SVC_PROVIDERS_DEFAULT: 'mock', SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'w1', 'mock'), SVC_AUTH_WORKER_TOKEN: TOKEN },
        /sbx worker w1 up: rpc (\S+),/,
      );
      for (const name of names()) {
        await until(`${name} sees w1 online`, async () => {
          const ws = (await call(url(name), 'GET', '/api/v1/workers')).body as Array<{ id: string; status: string }>;
          return ws.some((w) => w.id === 'w1' && w.status === 'online');
        });
      }
    }, 120_000);

    afterAll(async () => {
      // Runtimes outlive the replicas (containers on the engine): destroy what the tests left running.
      const live = names();
      if (live.length > 0) {
        const left = await call(url(live[0]!), 'GET', '/api/v1/sandboxes').catch(() => null);
        for (const s of (left?.body ?? []) as Array<{ id: string }>)
          await call(url(live[0]!), 'DELETE', `/api/v1/sandboxes/${s.id}`).catch(() => undefined);
      }
      await worker?.stop();
      for (const p of Object.values(replicas)) await p.stop();
      cluster?.destroy();
    }, 90_000);

    it('each replica knows itself, the live replicas and one leader per task', async () => {
      const all = await Promise.all(names().map(diagnostics));
      for (const [i, d] of all.entries()) {
        expect(d.replica.id).toBe(names()[i]);
        expect(d.replica.shared).toBe(true);
        expect(d.replica.live).toEqual(['ra', 'rb', 'rc']);
      }
      await until('one reaper leader agreed by all', async () => {
        const leaders = (await Promise.all(names().map(diagnostics))).map((d) => d.leaders.reaper);
        return leaders[0] !== null && leaders.every((l) => l === leaders[0]);
      });
    });

    it(`200 concurrent spawns over three replicas against a cap of ${CAP}: exactly ${CAP} admitted`, async () => {
      const order = ['ra', 'rb', 'rc'];
      const results = await Promise.all(Array.from({ length: 200 }, (_, i) => spawn(order[i % 3]!)));
      const created = results.filter((r) => r.status === 201);
      const refused = results.filter((r) => r.status !== 201);
      expect(created).toHaveLength(CAP);
      expect(new Set(refused.map((r) => `${r.status} ${r.body.code}`))).toEqual(new Set(['503 unavailable']));
      // Every replica's share was admitted against the one count.
      for (const name of order) expect(results.filter((r, i) => order[i % 3] === name && r.status === 201).length).toBeGreaterThan(0);
      for (const name of order) {
        const list = (await call(url(name), 'GET', '/api/v1/sandboxes')).body as Array<{ id: string; state: string }>;
        expect(list.filter((s) => s.state === 'running')).toHaveLength(CAP);
      }
      // No reservation outlives its spawn.
      const c = new pg.Client({ connectionString: cluster.dsn });
      await c.connect();
      expect(Number((await c.query('SELECT COUNT(*) AS n FROM admission_slots')).rows[0].n)).toBe(0);
      await c.end();
      // Capacity freed on one replica is capacity on the others.
      expect((await spawn('rb')).status).toBe(503);
      const ids = created.map((r) => r.body.id as string);
      expect((await call(url('rc'), 'DELETE', `/api/v1/sandboxes/${ids[0]}`)).status).toBe(200);
      expect((await spawn('ra')).status).toBe(201);
      // Clean up for the next tests.
      const live = (await call(url('ra'), 'GET', '/api/v1/sandboxes')).body as Array<{ id: string; state: string }>;
      await Promise.all(
        live
          .filter((s) => s.state === 'running')
          .map((s, i) => call(url(['ra', 'rb', 'rc'][i % 3]!), 'DELETE', `/api/v1/sandboxes/${s.id}`)),
      );
    }, 120_000);

    it('an SSE client on one replica sees events caused on the others; a replay on another replica loses nothing', async () => {
      const a = await openSse(`${url('ra')}/api/v1/events?types=sandbox.*`);
      const onB = (await spawn('rb')).body.id as string;
      const onC = (await spawn('rc')).body.id as string;
      const seen = await a.until(
        (f) => [onB, onC].every((id) => f.some((x) => x.event === 'sandbox.running' && x.data?.includes(id))),
        10_000,
      );
      const lastSeen = Number(seen[seen.length - 1]!.id);
      a.close();
      // While no client listens: destroys on B and C, a spawn on A.
      await call(url('rb'), 'DELETE', `/api/v1/sandboxes/${onB}`);
      await call(url('rc'), 'DELETE', `/api/v1/sandboxes/${onC}`);
      const onA = (await spawn('ra')).body.id as string;
      // Events reach the journal through each replica's outbox: wait (bounded) until all three are in.
      const expected = await until('the journal has all three', async () => {
        const got = (await journal(lastSeen)).filter((e) => e.type.startsWith('sandbox.'));
        const ids = new Set(got.map((e) => e.sandbox_id));
        return [onB, onC, onA].every((id) => ids.has(id)) && got.some((e) => e.type === 'sandbox.running' && e.sandbox_id === onA)
          ? got
          : undefined;
      });
      // Reconnect to C with the last id seen on A.
      const c = await openSse(`${url('rc')}/api/v1/events?types=sandbox.*`, { 'last-event-id': String(lastSeen) });
      const maxId = expected[expected.length - 1]!.id;
      await c.until((f) => f.some((x) => Number(x.id) >= maxId), 10_000);
      const got = c.events().filter((e) => e.id <= maxId);
      c.close();
      expect(got.map((e) => e.id)).toEqual(expected.map((e) => e.id));
      expect(got.every((e) => e.id > lastSeen)).toBe(true);
      await call(url('ra'), 'DELETE', `/api/v1/sandboxes/${onA}`);
    }, 60_000);

    it('a replica that does not run the sandbox serves it: exec, a file round trip and a preview, forwarded ' +
      'over the replica RPC', async () => {
      const made = await spawn('rb');
      expect(made.status).toBe(201);
      // Ties go to the replica that took the spawn; every replica sees who runs it.
      expect(made.body.worker_id).toBe('rb');
      const id = made.body.id as string;
      for (const name of ['ra', 'rc']) expect((await call(url(name), 'GET', `/api/v1/sandboxes/${id}`)).body.worker_id).toBe('rb');
      const ex = await call(url('ra'), 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo from-$((6*7)); echo e >&2; exit 5' });
      expect(ex.body).toMatchObject({ exit_code: 5, stdout: 'from-42\n', stderr: 'e\n' });
      const bytes = Buffer.from(Array.from({ length: 300_000 }, (_, i) => (i * 7) % 251));
      const w = await fetch(`${url('ra')}/api/v1/sandboxes/${id}/files?path=/workspace/www/blob.bin`, {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream' },
        body: bytes,
      });
      expect(w.status).toBe(200);
      const r = await fetch(`${url('rc')}/api/v1/sandboxes/${id}/files?path=/workspace/www/blob.bin`);
      expect(r.status).toBe(200);
      expect(Buffer.from(await r.arrayBuffer()).equals(bytes)).toBe(true);
      // A preview through ra, by Host, of a server inside the sandbox that rb runs.
      const port = await freePort();
      await call(url('rc'), 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/www/index.html', content: 'hello from rb\n' });
      // Docker previews reach the container's address; mock ones this host's loopback.
      const stop = httpdIn(url('rc'), id, provider === 'docker' ? String(port) : `127.0.0.1:${port}`);
      try {
        const page = await until('the preview answers through ra', async () => {
          const res = await hostRequest(url('ra'), `${port}-${id}.${PREVIEW_DOMAIN}`, '/index.html');
          return res.status === 200 ? res : undefined;
        });
        expect(page.body.toString()).toBe('hello from rb\n');
      } finally {
        stop.abort();
      }
      expect((await call(url('rc'), 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
      expect((await call(url('rb'), 'GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
    }, 60_000);

    it('kill -9 of a replica: its sandboxes are unhealthy (503 on operations, fast) until it returns, and no ' +
      'other replica takes them', async () => {
      const made = await spawn('rc');
      expect(made.body.worker_id).toBe('rc');
      const id = made.body.id as string;
      expect((await call(url('ra'), 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo before' })).body.stdout).toBe('before\n');
      await replicas.rc!.kill9();
      const t0 = Date.now();
      const ex = await call(url('ra'), 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo during' });
      expect(ex.status).toBe(503);
      expect(ex.body.code).toBe('unavailable');
      expect(Date.now() - t0).toBeLessThan(10_000);
      await until(
        'unhealthy on the survivors',
        async () => (await call(url('ra'), 'GET', `/api/v1/sandboxes/${id}`)).body.state === 'unhealthy',
      );
      const during = await call(url('rb'), 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo during' });
      expect([during.status, during.body.code]).toEqual([503, 'unavailable']);
      // Nobody took it over, and new spawns go to the live replicas only.
      expect((await call(url('rb'), 'GET', `/api/v1/sandboxes/${id}`)).body.worker_id).toBe('rc');
      await until('placement skips rc', async () => {
        const s = await spawn('ra');
        if (s.status !== 201) return undefined;
        await call(url('ra'), 'DELETE', `/api/v1/sandboxes/${s.body.id}`);
        return s.body.worker_id !== 'rc';
      });
      replicas.rc = await startReplica('rc');
      await until('running again', async () => (await call(url('ra'), 'GET', `/api/v1/sandboxes/${id}`)).body.state === 'running', 30_000);
      const after = await until('exec through ra again', async () => {
        const r = await call(url('ra'), 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo after' });
        return r.status === 200 ? r : undefined;
      });
      expect(after.body.stdout).toBe('after\n');
      expect((await call(url('rb'), 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    }, 90_000);

    it('kill -9 of the leader: another replica reaps an expired sandbox within two lease TTLs', async () => {
      const leader = (await diagnostics('ra')).leaders.reaper as string;
      const other = names().find((n) => n !== leader)!;
      const watch = await openSse(`${url(other)}/api/v1/events?types=sandbox.destroyed`);
      const sb = (await spawn(other, { ttl: '3s' })).body as { id: string; expires_at: string };
      await replicas[leader]!.kill9();
      const killedAt = Date.now();
      await watch.until((f) => f.some((x) => x.data?.includes(sb.id)), 20_000);
      const reapedAt = Date.now();
      watch.close();
      // Reaped at most two TTLs after both the kill and the expiry.
      expect(reapedAt).toBeLessThanOrEqual(Math.max(killedAt, Date.parse(sb.expires_at)) + 2 * LEADER_TTL_MS);
      const now = (await diagnostics(other)).leaders.reaper;
      expect(now).not.toBe(leader);
      expect(names()).toContain(now);
      expect((await call(url(other), 'GET', `/api/v1/sandboxes/${sb.id}`)).status).toBe(404);
      // The killed replica rejoins under its id.
      replicas[leader] = await startReplica(leader);
      await until('rejoined', async () => ((await diagnostics(leader)).replica.live as string[]).includes(leader));
    }, 60_000);

    it('PostgreSQL stopped for 10 s: 503 while it is away, then everything works without a restart and nothing is lost', async () => {
      const before = await Promise.all([spawn('ra'), spawn('rb')]);
      expect(before.map((r) => r.status)).toEqual([201, 201]);
      const running = (await call(url('rc'), 'GET', '/api/v1/sandboxes')).body as Array<{ id: string; state: string }>;
      const ids = running
        .filter((s) => s.state === 'running')
        .map((s) => s.id)
        .sort();
      expect(ids).toEqual(expect.arrayContaining(before.map((r) => r.body.id as string)));

      cluster.stop();
      const stoppedAt = Date.now();
      const during: Array<{ status: number; code: string; ms: number }> = [];
      while (Date.now() - stoppedAt < 10_000) {
        for (const name of names()) {
          const t0 = Date.now();
          const r = await call(url(name), 'GET', '/api/v1/sandboxes');
          during.push({ status: r.status, code: r.body?.code, ms: Date.now() - t0 });
          const s = await call(url(name), 'POST', '/api/v1/sandboxes', { ttl: '10m' });
          during.push({ status: s.status, code: s.body?.code, ms: Date.now() - t0 });
          // Not ready: a load balancer stops sending requests here.
          const ready = await call(url(name), 'GET', '/api/v1/ready');
          during.push({ status: ready.status, code: ready.body?.code, ms: 0 });
        }
        await new Promise((r) => setTimeout(r, 500));
      }
      cluster.start();
      expect(during.length).toBeGreaterThan(0);
      for (const d of during) {
        expect(d.status).toBe(503);
        expect(d.code).toBe('unavailable');
        expect(d.ms).toBeLessThan(10_000);
      }

      for (const name of names()) {
        const list = await until(`${name} answers again`, async () => {
          const r = await call(url(name), 'GET', '/api/v1/sandboxes');
          return r.status === 200 ? (r.body as Array<{ id: string; state: string }>) : undefined;
        });
        expect(
          list
            .filter((s) => s.state === 'running')
            .map((s) => s.id)
            .sort(),
        ).toEqual(ids);
      }
      // Events flow across replicas again (the listeners reconnected), and spawns work everywhere.
      const a = await openSse(`${url('ra')}/api/v1/events?types=sandbox.created`);
      const fresh = await until('spawn on rc', async () => {
        const r = await spawn('rc');
        return r.status === 201 ? (r.body.id as string) : undefined;
      });
      await a.until((f) => f.some((x) => x.data?.includes(fresh)), 10_000);
      a.close();
      for (const name of names()) expect((await spawn(name)).status).toBe(201);
      await until('leaders back', async () => (await diagnostics('rb')).leaders.reaper !== null);
      for (const name of names()) expect((await call(url(name), 'GET', '/api/v1/ready')).status).toBe(200);
    }, 90_000);
  });
});
