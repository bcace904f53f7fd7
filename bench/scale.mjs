#!/usr/bin/env node
// One control plane as the live count grows (DESIGN.md §13): a real `sbx serve` (mock provider) on
// SQLite, and on PostgreSQL when SBX_TEST_POSTGRES_DSN is set. Live sandboxes beyond the ones it
// spawns are rows written straight into its database (owned by a simulated worker, so nothing tries
// to run them): the figures are the control plane's, not a provider's.
// Usage: npm run build && node bench/scale.mjs   (markdown on stdout; progress on stderr)
// Env: SCALE_LIVE (default 100000), SCALE_SPAWNS (spawns per rate sample, default 400).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './lib/net.mjs';
import { writeSection } from './lib/sections.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'sbx.js');
const LIVE = Number(process.env.SCALE_LIVE ?? 100_000);
const SPAWNS = Number(process.env.SCALE_SPAWNS ?? 400);
const DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';
const log = (m) => process.stderr.write(`bench scale: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## scale\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}
const { SANDBOX_COLUMNS, sandboxValues } = await import(join(ROOT, 'dist', 'adapters', 'stores', 'shared', 'records.js'));

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const f = (x, d = 2) => Number(x).toFixed(d);

/** `n` live rows owned by a simulated worker (never run, never reconciled away: unhealthy, TTL far ahead). */
function rows(from, n) {
  const now = Date.now();
  const out = [];
  for (let i = from; i < from + n; i++) {
    out.push(
      sandboxValues({
        id: `sb-sim-${String(i).padStart(7, '0')}`,
        state: 'unhealthy',
        provider: 'mock',
        image: 'sim',
        memory_mb: 64,
        vcpus: 1,
        created_at: new Date(now - 3_600_000 + i).toISOString(),
        updated_at: new Date(now).toISOString(),
        expires_at: new Date(now + 86_400_000).toISOString(),
        metadata: {},
        owner_id: `sim-${i % 1000}`,
        worker_id: 'sim-worker',
        runtime_id: null,
        template: null,
      }),
    );
  }
  return out;
}

async function seeder(driver, where) {
  const cols = SANDBOX_COLUMNS.join(', ');
  if (driver === 'sqlite') {
    const { default: Database } = await import('better-sqlite3');
    const db = new Database(where);
    db.pragma('busy_timeout = 10000');
    const stmt = db.prepare(`INSERT INTO sandboxes (${cols}) VALUES (${SANDBOX_COLUMNS.map(() => '?').join(', ')})`);
    return {
      add: async (from, n) => db.transaction(() => rows(from, n).forEach((r) => stmt.run(...r)))(),
      close: async () => db.close(),
    };
  }
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: where });
  await client.connect();
  return {
    add: async (from, n) => {
      for (let at = from; at < from + n; at += 1000) {
        const batch = rows(at, Math.min(1000, from + n - at));
        const params = batch.flat();
        const w = SANDBOX_COLUMNS.length;
        const values = batch.map((_, r) => `(${SANDBOX_COLUMNS.map((__, c) => `$${r * w + c + 1}`).join(', ')})`).join(', ');
        await client.query(`INSERT INTO sandboxes (${cols}) VALUES ${values}`, params);
      }
    },
    close: () => client.end(),
  };
}

/**
 * A fleet grows over minutes, not in one bulk insert: the planners' statistics (SQLite's periodic
 * `PRAGMA optimize` in sbx, PostgreSQL's autovacuum analyze) catch up within a minute.
 */
const SETTLE_MS = Number(process.env.SCALE_SETTLE_MS ?? 65_000);
async function settle(driver) {
  log(`${driver}: waiting ${SETTLE_MS / 1000} s for the planner's statistics`);
  await new Promise((r) => setTimeout(r, SETTLE_MS));
}

async function run(driver) {
  const dir = mkdtempSync(join(tmpdir(), `sbx-bench-scale-${driver}-`));
  const port = await freePort();
  const schema = `sbx_scale_${randomBytes(5).toString('hex')}`;
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    SVC_SERVER_PORT: String(port),
    SVC_PROVIDERS_DEFAULT: 'mock',
    SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'mock'),
    SVC_LOGGING_LEVEL: 'warn',
    SVC_DEFAULTS_MAX_SANDBOXES: '1000000',
    SVC_DEFAULTS_MAX_SANDBOXES_PER_OWNER: '100000',
    SVC_DEFAULTS_TTL: '2h',
  };
  let dbWhere;
  let pgAdmin;
  if (driver === 'sqlite') {
    dbWhere = join(dir, 'sbx.db');
    Object.assign(env, { SVC_DATABASE_DRIVER: 'sqlite', SVC_DATABASE_PATH: dbWhere });
  } else {
    const { default: pg } = await import('pg');
    pgAdmin = new pg.Client({ connectionString: DSN });
    await pgAdmin.connect();
    await pgAdmin.query(`CREATE SCHEMA "${schema}"`);
    dbWhere = `${DSN}${DSN.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
    Object.assign(env, { SVC_DATABASE_DRIVER: 'postgres', SVC_DATABASE_DSN: dbWhere });
  }
  const server = spawn(process.execPath, [BIN, 'serve'], { env, cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
  const api = `http://127.0.0.1:${port}`;
  try {
    for (
      let i = 0;
      !(await fetch(`${api}/api/v1/live`)
        .then((r) => r.ok)
        .catch(() => false));
      i++
    ) {
      if (i > 200) throw new Error('sbx serve did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
    const seed = await seeder(driver, dbWhere);
    const post = (path, body) =>
      fetch(api + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) =>
        r.json(),
      );
    const timeGets = async (path, n) => {
      const xs = [];
      for (let i = 0; i < n; i++) {
        const t = performance.now();
        const r = await fetch(api + path);
        await r.arrayBuffer();
        xs.push(performance.now() - t);
      }
      return xs;
    };
    /** Spawns per second with 16 in flight. */
    const spawnRate = async (n) => {
      let next = 0;
      const t = performance.now();
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next++ < n) await post('/api/v1/sandboxes', {});
        }),
      );
      return n / ((performance.now() - t) / 1000);
    };
    const one = await post('/api/v1/sandboxes', {});
    await timeGets(`/api/v1/sandboxes/${one.id}`, 50);
    const getNone = await timeGets(`/api/v1/sandboxes/${one.id}`, 300);
    const pageNone = await timeGets('/api/v1/sandboxes?limit=100', 200);
    log(`${driver}: spawn rate with none live`);
    const rateNone = await spawnRate(SPAWNS);
    log(`${driver}: seeding 10,000 live`);
    await seed.add(0, 10_000);
    await settle(driver);
    const rate10k = await spawnRate(SPAWNS);
    log(`${driver}: seeding up to ${LIVE} live`);
    await seed.add(10_000, LIVE - 10_000);
    await seed.close();
    await settle(driver);
    await timeGets(`/api/v1/sandboxes/${one.id}`, 50);
    const getLive = await timeGets(`/api/v1/sandboxes/${one.id}`, 300);
    const pageLive = await timeGets('/api/v1/sandboxes?limit=100', 200);
    // A page deep in the list: follow the cursor of the first page a few hops.
    let link = (await fetch(`${api}/api/v1/sandboxes?limit=1000`)).headers.get('link');
    for (let i = 0; i < 20 && link; i++) link = (await fetch(api + /<([^>]*)>/.exec(link)[1])).headers.get('link');
    const deepPath = link ? /<([^>]*)>/.exec(link)[1].replace('limit=1000', 'limit=100') : '/api/v1/sandboxes?limit=100';
    const pageDeep = await timeGets(deepPath, 200);
    await timeGets('/api/v1/admin/metrics/prometheus', 3);
    const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.pid}/status`, 'utf8'))[1]) / 1024;
    return {
      driver,
      rateNone,
      rate10k,
      getNone: pct(getNone, 50),
      getLive: pct(getLive, 50),
      pageNone: pct(pageNone, 50),
      pageLive: pct(pageLive, 50),
      pageDeep: pct(pageDeep, 50),
      rss,
    };
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
    if (pgAdmin) {
      await pgAdmin.query(`DROP SCHEMA "${schema}" CASCADE`).catch(() => undefined);
      await pgAdmin.end();
    }
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = [await run('sqlite')];
if (DSN) results.push(await run('postgres'));
else log('PostgreSQL skipped: set SBX_TEST_POSTGRES_DSN');

const rowsOut = results.map(
  (r) =>
    `| ${r.driver} | ${f(r.rateNone, 0)} | ${f(r.rate10k, 0)} | **${f(r.rate10k / r.rateNone)}** | ` +
    `**${f(r.rss, 0)}** | ${f(r.pageNone, 2)} | **${f(r.pageLive, 2)}** / ${f(r.pageDeep, 2)} | ${f(r.getNone, 2)} ` +
    `| ${f(r.getLive, 2)} | **${f(r.getLive / r.getNone)}** |`,
);
const k = `${LIVE / 1000}k`;
const HEADS = [
  'store',
  'spawns/s, none live',
  'spawns/s, 10,000 live',
  'ratio',
  `RSS MB at ${k}`,
  'page of 100 p50 ms, none',
  `at ${k}: first / deep`,
  'GET one p50 ms, none',
  `at ${k}`,
  'ratio',
];
const section = `## scale

One \`sbx serve\` (mock provider) as live sandboxes grow to ${LIVE.toLocaleString('en')}, on SQLite${DSN ? ' and PostgreSQL' : ''};
the live rows beyond its own spawns are written into its database as sandboxes of a simulated
worker. Spawn rates are ${SPAWNS} spawns with 16 in flight, under a global and a per-owner cap (so
every admission counts); after each bulk insert the run waits ${SETTLE_MS / 1000} s for the planners'
statistics. ${cpus().length} CPUs, Node ${process.version}. Targets (DESIGN §13): spawn rate with 10,000 live ÷
with none ≥ 0.8; RSS with 100,000 live ≤ 400 MB; a page of 100 at 100,000 live ≤ 10 ms p50; GET of one
at 100,000 live ≤ 1.2 × at none.

| ${HEADS.join(' | ')} |
|---|---|---|---|---|---|---|---|---|---|
${rowsOut.join('\n')}
`;
console.log(section);
const HEADER = `# Scale of one control plane

What one \`sbx serve\` costs as the fleet grows (DESIGN.md §13), written by \`npm run bench:scale\`
(\`bench/scale.mjs\`, section "Figures") and \`node bench/fleet.mjs\` (section "Fleet"). Ratios are from one run, side by side.

How it stays flat:

- Live sandboxes are counted as they change: triggers keep a counter row in total, per owner, per
  worker and per worker and owner. Admission and placement read those rows and subtract the few
  rows still in a live state but past their TTL (an \`expires_at\` index range the reaper keeps
  short), so counts are exact at any moment and cost the same at 100 or 100,000 live. A granted slot
  becomes its stored row in one serialized step (one process) or under a database lock shared by
  every replica, so exactly the cap is admitted under any concurrency.
- Placement reads the worker registry at most once a second (changes made through this process at once).
- Lists are keyset pages in (created_at, id) order over a partial index of the listed states,
  visibility applied in the query; cursors are signed with an installation secret in the store.
- Metrics and diagnostics let the database aggregate; the reaper and prune select past-TTL rows by
  the \`expires_at\` index and walk live ones in pages of 500; remote reconciliation pages too.
`;
writeSection(
  join(ROOT, 'SCALE.md'),
  'Figures',
  `${section.replace('## scale\n', '')}\nWritten on ${new Date().toISOString().slice(0, 10)}.\n`,
  HEADER,
);
process.exit(0);
