#!/usr/bin/env node
// Spawn throughput with one vs three control-plane replicas on one PostgreSQL (issue 15). Three
// real `sbx serve` replicas (pure control planes, a global cap set so every spawn takes the
// cross-replica admission lock) and one real `sbx worker` (mock provider) run the whole time;
// rounds alternate between sending every spawn to replica 1 and spreading them over all three,
// so machine noise hits both alike. Every round destroys what it made, so each starts empty.
// Usage: npm run build && SBX_TEST_POSTGRES_DSN=… node bench/replicas.mjs
// Env: BENCH_SPAWNS (per round, default 300), BENCH_CONCURRENCY (default 24), BENCH_ROUNDS (default 3).
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processes } from './lib/procs.mjs';
import pg from 'pg';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DSN = process.env.SBX_TEST_POSTGRES_DSN ?? '';
const SPAWNS = Number(process.env.BENCH_SPAWNS ?? 300);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 24);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SCHEMA = 'sbx_bench_replicas';
const TOKEN = 'bench-replicas-worker-token-0123456789';
const log = (m) => process.stderr.write(`bench replicas: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## replicas\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}
if (!DSN) {
  console.log('## replicas\n\nSkipped: set SBX_TEST_POSTGRES_DSN (bash scripts/test-postgres-up.sh prints one).\n');
  process.exit(0);
}

const dsn = `${DSN}${DSN.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${SCHEMA}`)}`;
async function sql(text) {
  const c = new pg.Client({ connectionString: DSN });
  await c.connect();
  try {
    await c.query(text);
  } finally {
    await c.end();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-replicas-'));
const { start, cleanup } = processes(dir);

async function api(base, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** SPAWNS spawns, CONCURRENCY at a time, the i-th to targets[i % n]; then every one destroyed. */
async function round(targets) {
  const lat = [];
  const ids = [];
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < SPAWNS) {
        const i = next++;
        const s = performance.now();
        const sb = await api(targets[i % targets.length], 'POST', '/api/v1/sandboxes', { ttl: '10m' });
        lat.push(performance.now() - s);
        ids.push(sb.id);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  let j = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (j < ids.length) {
        const id = ids[j++];
        await api(targets[0], 'DELETE', `/api/v1/sandboxes/${id}`);
      }
    }),
  );
  lat.sort((a, b) => a - b);
  return { rate: SPAWNS / seconds, p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)] };
}

await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`);
try {
  const urls = [];
  for (const id of ['r1', 'r2', 'r3']) {
    urls.push(
      await start(
        id,
        ['serve', '--port', '0'],
        {
          SVC_DATABASE_DRIVER: 'postgres',
          SVC_DATABASE_DSN: dsn,
          SVC_SERVER_LOCAL_WORKER: 'false',
          SVC_SERVER_REPLICA_ID: id,
          SVC_AUTH_WORKER_TOKEN: TOKEN,
          SVC_DEFAULTS_MAX_SANDBOXES: '100000',
        },
        /listening on (http:\/\/127\.0\.0\.1:\d+)/,
      ),
    );
  }
  await start(
    'w1',
    ['worker', '--id', 'w1', '--control-plane', urls.join(','), '--listen', '127.0.0.1:0', '--heartbeat-interval', '1s'],
    {
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'w1', 'mock'),
      SVC_AUTH_WORKER_TOKEN: TOKEN,
    },
    /(sbx worker w1 up)/,
  );
  for (const u of urls) {
    for (let i = 0; ; i++) {
      const ws = await api(u, 'GET', '/api/v1/workers');
      if (ws.some((w) => w.id === 'w1' && w.status === 'online')) break;
      if (i > 100) throw new Error(`${u} never saw w1`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  log(`warm-up`);
  await round(urls);
  const one = [];
  const three = [];
  for (let r = 0; r < ROUNDS; r++) {
    one.push(await round([urls[0]]));
    log(`round ${r + 1}: 1 replica ${one.at(-1).rate.toFixed(0)}/s`);
    three.push(await round(urls));
    log(`round ${r + 1}: 3 replicas ${three.at(-1).rate.toFixed(0)}/s`);
  }
  const med = (xs, k) => xs.map((x) => x[k]).sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const row = (name, xs) => `| ${name} | ${med(xs, 'rate').toFixed(0)} | ${med(xs, 'p50').toFixed(1)} | ${med(xs, 'p99').toFixed(1)} |`;
  console.log(`## replicas

Spawn throughput through one vs three \`sbx serve\` replicas on one PostgreSQL (\`node bench/replicas.mjs\`):
${SPAWNS} spawns a round, ${CONCURRENCY} at a time, placed on one \`sbx worker\` (mock provider), with a global cap
so every spawn takes the cross-replica admission lock. Rounds alternate (${ROUNDS} each); medians of the rounds.
All processes and PostgreSQL share this machine's CPUs, so three replicas cannot add CPU here: the
ratio shows what the shared admission lock and event journal cost, not what more hosts would gain.

| replicas | spawns/s | p50 ms | p99 ms |
|---|---|---|---|
${row('1', one)}
${row('3 (round-robin)', three)}

Throughput 3 replicas / 1 replica: **${(med(three, 'rate') / med(one, 'rate')).toFixed(2)}**.
`);
} finally {
  cleanup();
  await sql(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => undefined);
}
