#!/usr/bin/env node
// Fleet simulation (DESIGN.md §13, issue 23): one `sbx serve` as a pure control plane
// (`server.local_worker: false`, PostgreSQL store) and, in this process, many simulated workers —
// each with its own id and its own signed token, heartbeating over the real HTTP route and
// answering the real worker RPC (`POST {rpc_url}/rpc`, envelopes as contracts/worker-rpc.ts) with an
// in-memory runtime. The control plane runs on CPU 0, this simulator on CPU 1 (taskset), so CPU and
// RSS figures are the control plane's; PostgreSQL shares the machine.
// Usage: npm run build && SBX_TEST_POSTGRES_DSN=… node bench/fleet.mjs   (markdown on stdout)
// Env: FLEET_WORKERS (default "100,1000"), FLEET_LIVE (live sandboxes seeded, default 100000),
//      FLEET_SPAWNS (spawns per latency sample, default 300), FLEET_RECONCILE_S (seconds of back-to-back reconciliation passes timed,
// default 60).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { freePort } from './lib/net.mjs';
import { renderFleetSection } from './lib/fleet-section.mjs';
import { writeSection } from './lib/sections.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'sbx.js');
const DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';
const FLEETS = (process.env.FLEET_WORKERS ?? '100,1000').split(',').map(Number);
const LIVE = Number(process.env.FLEET_LIVE ?? 100_000);
const SPAWNS = Number(process.env.FLEET_SPAWNS ?? 300);
const PROBE_S = Number(process.env.FLEET_RECONCILE_S ?? 60);
const KEY = randomBytes(32).toString('hex');
const log = (m) => process.stderr.write(`bench fleet: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## fleet\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}
if (!DSN) {
  console.log('## fleet\n\nSkipped: set SBX_TEST_POSTGRES_DSN (bash scripts/test-postgres-up.sh prints one).\n');
  process.exit(0);
}
const { mintWorkerToken } = await import(join(ROOT, 'dist', 'transports', 'shared', 'worker-auth.js'));
const { AUD_CONTROL_PLANE, WORKER_SCOPES } = await import(join(ROOT, 'dist', 'core', 'auth', 'worker-claims.js'));
const { SANDBOX_COLUMNS, sandboxValues } = await import(join(ROOT, 'dist', 'adapters', 'stores', 'shared', 'records.js'));

const pinned = existsSync('/usr/bin/taskset') && cpus().length >= 2;
if (pinned) spawn('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const f = (x, d = 1) => Number(x).toFixed(d);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** CPU seconds (user + system) and RSS (MB) of a process, from /proc. */
function usage(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  const ticks = Number(stat[11]) + Number(stat[12]);
  const rss = Number(/^VmRSS:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
  return { cpu: ticks / 100, rss };
}

// ---------------------------------------------------------------- the simulated workers

/** One HTTP server answers the RPC of every simulated worker: `{rpc_url}` is `/w/<id>`. */
function simulator() {
  const runtimes = new Map();
  const spawned = new Map(); // sandbox id -> arrival time (performance.now())
  // Batched status calls per worker (reconciliation asks each worker once per 1,000 of its sandboxes).
  const stats = { spawn: 0, destroy: 0, status: 0, other: 0, batchCalls: new Map(), batchAsked: 0 };
  const server = createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const m = /^\/w\/([^/]+)\/rpc$/.exec(req.url ?? '');
      let env;
      try {
        env = JSON.parse(Buffer.concat(chunks).toString());
      } catch {
        env = null;
      }
      const reply = (status, body) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (!m || !env)
        return reply(400, { id: env?.id ?? '', worker_id: m?.[1] ?? '', error: { code: 'bad_request', message: 'bad envelope' } });
      const worker = m[1];
      const p = env.params ?? {};
      const ok = (result) => reply(200, { id: env.id, worker_id: worker, result });
      switch (env.method) {
        case 'worker.spawn': {
          stats.spawn++;
          spawned.set(p.sandbox_id, at);
          const runtime = `rt-${p.sandbox_id}`;
          runtimes.set(runtime, worker);
          return ok({ sandbox_id: p.sandbox_id, runtime_id: runtime, state: 'running', provider: p.provider, worker_id: worker });
        }
        case 'worker.destroy':
          stats.destroy++;
          runtimes.delete(p.runtime_id);
          return ok({ sandbox_id: p.sandbox_id, state: 'destroyed' });
        case 'worker.status':
          stats.status++;
          return ok({ sandbox_id: p.sandbox_id, state: 'running', provider: p.provider, worker_id: worker });
        case 'worker.status_batch':
          stats.batchCalls.set(worker, (stats.batchCalls.get(worker) ?? 0) + 1);
          stats.batchAsked += p.sandboxes.length;
          return ok({ statuses: p.sandboxes.map((t) => ({ sandbox_id: t.sandbox_id, state: 'running' })) });
        default:
          stats.other++;
          return reply(200, {
            id: env.id,
            worker_id: worker,
            error: { code: 'not_implemented', message: `${env.method} is not simulated` },
          });
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  return { server, spawned, stats };
}

// ---------------------------------------------------------------- one fleet size

async function fleet(workers) {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-fleet-'));
  const schema = `sbx_fleet_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: DSN });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${schema}"`);
  const dsn = `${DSN}${DSN.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const sim = simulator();
  const simPort = await freePort();
  await new Promise((r) => sim.server.listen(simPort, '127.0.0.1', r));
  const port = await freePort();
  const api = `http://127.0.0.1:${port}`;
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    SVC_SERVER_PORT: String(port),
    SVC_SERVER_LOCAL_WORKER: 'false',
    SVC_DATABASE_DRIVER: 'postgres',
    SVC_DATABASE_DSN: dsn,
    SVC_AUTH_WORKER_SIGNING_KEY: KEY,
    SVC_LOGGING_LEVEL: 'warn',
    SVC_DEFAULTS_MAX_SANDBOXES: '1000000',
    SVC_DEFAULTS_TTL: '2h',
  };
  const serve = (more = {}) =>
    spawn(pinned ? 'taskset' : process.execPath, pinned ? ['-c', '0', process.execPath, BIN, 'serve'] : [BIN, 'serve'], {
      env: { ...env, ...more },
      cwd: dir,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  let server = serve();
  const up = async () => {
    for (
      let i = 0;
      !(await fetch(`${api}/api/v1/live`)
        .then((r) => r.ok)
        .catch(() => false));
      i++
    ) {
      if (i > 600) throw new Error('sbx serve did not start');
      await sleep(100);
    }
  };
  const ids = Array.from({ length: workers }, (_, i) => `fw-${String(i).padStart(4, '0')}`);
  let beating = true;
  let beats = 0;
  try {
    await up();
    const heartbeat = (id) =>
      fetch(`${api}/api/v1/worker/${id}/heartbeat`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-worker-id': id,
          'x-worker-token': mintWorkerToken(KEY, { worker_id: id, aud: AUD_CONTROL_PLANE, scopes: [...WORKER_SCOPES] }),
        },
        body: JSON.stringify({
          hostname: `sim-${id}`,
          status: 'online',
          providers: ['mock'],
          capabilities: ['spawn', 'exec', 'files'],
          capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0, rpc_url: `http://127.0.0.1:${simPort}/w/${id}` },
        }),
      }).then(async (r) => {
        await r.arrayBuffer();
        if (r.status !== 200) throw new Error(`heartbeat ${id}: ${r.status}`);
      });
    const pool = async (items, n, fn) => {
      let i = 0;
      await Promise.all(
        Array.from({ length: n }, async () => {
          while (i < items.length) await fn(items[i++]);
        }),
      );
    };

    // Heartbeats handled per second: every worker, 3 rounds, 32 in flight.
    const pid = server.pid;
    const hb0 = performance.now();
    for (let r = 0; r < 3; r++) await pool(ids, 32, heartbeat);
    const hbRate = (3 * workers) / ((performance.now() - hb0) / 1000);
    log(`${workers} workers: ${f(hbRate, 0)} heartbeats/s`);
    // Then every worker beats every 10 s (fresh for placement), spread evenly, for the rest of the run.
    const beat = (async () => {
      let k = 0;
      while (beating) {
        await heartbeat(ids[k++ % workers]).then(
          () => beats++,
          () => undefined,
        );
        await sleep(10_000 / workers);
      }
    })();

    // Live sandboxes of the fleet, written straight into the store (spread over the workers), each
    // with a runtime id: every reconciliation pass asks their workers about all of them.
    const cols = SANDBOX_COLUMNS.join(', ');
    const now = Date.now();
    for (let at = 0; at < LIVE; at += 1000) {
      const batch = [];
      for (let i = at; i < Math.min(LIVE, at + 1000); i++) {
        batch.push(
          sandboxValues({
            id: `sb-fleet-${String(i).padStart(7, '0')}`,
            state: 'running',
            provider: 'mock',
            image: 'sim',
            memory_mb: 64,
            vcpus: 1,
            created_at: new Date(now - 3_600_000 + i).toISOString(),
            updated_at: new Date(now).toISOString(),
            expires_at: new Date(now + 86_400_000).toISOString(),
            metadata: {},
            owner_id: `owner-${i % 500}`,
            worker_id: ids[i % workers],
            runtime_id: `rt-seed-${i}`,
            template: null,
          }),
        );
      }
      const w = SANDBOX_COLUMNS.length;
      const values = batch.map((_, r) => `(${SANDBOX_COLUMNS.map((__, c) => `$${r * w + c + 1}`).join(', ')})`).join(', ');
      await admin.query(`INSERT INTO "${schema}".sandboxes (${cols}) VALUES ${values}`, batch.flat());
    }
    await admin.query(`ANALYZE "${schema}".sandboxes`);
    log(`${workers} workers: ${LIVE} live sandboxes seeded`);

    // Placement latency: request sent → the chosen worker's worker.spawn arrives (admission,
    // placement and the lease on the control plane), one spawn at a time.
    const tuple = async () => {
      const t0 = performance.now();
      const r = await fetch(`${api}/api/v1/sandboxes`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-user-id': `owner-${Math.floor(Math.random() * 500)}` },
        body: '{"ttl":"1h"}',
      });
      const body = await r.json();
      const t1 = performance.now();
      if (r.status !== 201) throw new Error(`spawn: ${r.status} ${JSON.stringify(body)}`);
      return { place: sim.spawned.get(body.id) - t0, total: t1 - t0, id: body.id };
    };
    const c0 = usage(pid);
    const serial = [];
    for (let i = 0; i < SPAWNS; i++) serial.push(await tuple());
    const c1 = usage(pid);
    const placement = serial.map((s) => s.place);
    // The control plane's own timing of its placement decisions (the last 1,024: these spawns).
    const sched = (await (await fetch(`${api}/api/v1/admin/diagnostics`)).json()).scheduler;
    const beats0 = beats;
    const writes0 = Number(
      (await admin.query(`SELECT SUM(n_tup_ins + n_tup_upd + n_tup_del) AS n FROM pg_stat_user_tables WHERE schemaname = $1`, [schema]))
        .rows[0].n,
    );
    // Saturation: throughput and latency as concurrency grows.
    const load = [];
    for (const conc of [1, 4, 16, 64]) {
      const lat = [];
      const t0 = performance.now();
      const before = usage(pid);
      await pool(Array.from({ length: SPAWNS }), conc, async () => lat.push((await tuple()).total));
      const secs = (performance.now() - t0) / 1000;
      const after = usage(pid);
      load.push({ conc, rate: SPAWNS / secs, p50: pct(lat, 50), p99: pct(lat, 99), cpu: (after.cpu - before.cpu) / secs });
      log(`${workers} workers, ${conc} in flight: ${f(SPAWNS / secs, 0)} spawns/s, p99 ${f(pct(lat, 99))} ms`);
    }
    // PostgreSQL's own row counters lag a little: read them after the load.
    await sleep(1000);
    const writes1 = Number(
      (await admin.query(`SELECT SUM(n_tup_ins + n_tup_upd + n_tup_del) AS n FROM pg_stat_user_tables WHERE schemaname = $1`, [schema]))
        .rows[0].n,
    );
    const end = usage(pid);

    // Reconciliation: the control plane again with a 1 s period, so passes over every live remote
    // sandbox run back to back; a pass takes the window ÷ the passes it completed (each asks about
    // every sandbox once), at most 1 s more than the pass itself (the timer's wait).
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
    server = serve({ SVC_SERVER_RECONCILE_INTERVAL: '1s' });
    await up();
    const asked = Number(
      (
        await admin.query(
          `SELECT COUNT(*) AS n FROM "${schema}".sandboxes WHERE state IN ('running', 'unhealthy') AND runtime_id IS NOT NULL`,
        )
      ).rows[0].n,
    );
    const [calls0, asked0, single0] = [
      [...sim.stats.batchCalls.values()].reduce((a, b) => a + b, 0),
      sim.stats.batchAsked,
      sim.stats.status,
    ];
    const r0 = performance.now();
    await sleep(PROBE_S * 1000);
    const window = (performance.now() - r0) / 1000;
    const passes = (sim.stats.batchAsked - asked0) / asked;
    const reconcile = {
      asked,
      passes,
      passS: passes > 0 ? window / passes : Number.POSITIVE_INFINITY,
      callsPerPass: passes > 0 ? ([...sim.stats.batchCalls.values()].reduce((a, b) => a + b, 0) - calls0) / passes : 0,
      singleCalls: sim.stats.status - single0,
    };
    log(`${workers} workers: reconciliation pass over ${asked} sandboxes ${f(reconcile.passS)} s, ${f(reconcile.callsPerPass, 0)} calls`);
    return {
      reconcile,
      workers,
      hbRate,
      place50: pct(placement, 50),
      place99: pct(placement, 99),
      decide50: sched.placement_p50_ms,
      decide99: sched.placement_p99_ms,
      cpuPerSpawnMs: ((c1.cpu - c0.cpu) / SPAWNS) * 1000,
      // A heartbeat is one row update: those during the window are not the spawns'.
      writesPerSpawn: (writes1 - writes0 - (beats - beats0)) / (SPAWNS * 4),
      rss: end.rss,
      load,
    };
  } finally {
    beating = false;
    server.kill('SIGKILL');
    sim.server.closeAllConnections?.();
    sim.server.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await admin.end();
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [];
for (const n of FLEETS) results.push(await fleet(n));

const fleetSection = renderFleetSection({ results, live: LIVE, spawns: SPAWNS, probeS: PROBE_S, pinned });
console.log(fleetSection);
// SCALE.md keeps the section, beside bench:scale's figures.
writeSection(
  join(ROOT, 'SCALE.md'),
  'Fleet',
  `${fleetSection.replace('## fleet\n', '')}\nWritten on ${new Date().toISOString().slice(0, 10)}.\n`,
);
