#!/usr/bin/env node
// Spawn admission under pressure: 200 concurrent spawn requests against max_sandboxes=50 in queue
// mode (mock provider, SQLite store, real HTTP on port 0) while a loop destroys the oldest sandbox
// every few milliseconds. Reports total time, queue wait percentiles and proof of no over-admission
// (the highest number of active sandboxes, from the event bus and from store samples).
// Usage: npm run build && node bench/admission.mjs   (prints a markdown section on stdout)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createControlPlane } from '../dist/compose/control-plane.js';
import { loadConfig } from '../dist/config/index.js';

const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200);
const CAPACITY = Number(process.env.BENCH_CAPACITY ?? 50);
const DESTROY_EVERY_MS = Number(process.env.BENCH_DESTROY_EVERY_MS ?? 5);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const pct = (sorted, p) => (sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]);
const ms = (n) => `${Math.round(n)} ms`;

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-admission-'));
const { config } = await loadConfig({
  cwd: dir,
  home: dir,
  env: {},
  overrides: {
    server: { host: '127.0.0.1', port: 0 },
    database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } },
    logging: { level: 'silent' },
    defaults: { max_sandboxes: CAPACITY, spawn_overflow: 'queue', spawn_queue_timeout: '2m', max_spawn_queue: REQUESTS },
  },
});
const plane = await createControlPlane(config, { home: dir, logger: pino({ level: 'silent' }), reconcile: false });
const url = await plane.listen();
const { bus, store, admission, locator } = plane.deps;

// Exact concurrency from the bus: +1 once a sandbox is stored and announced, -1 once destroyed.
const active = new Map();
let maxActiveBus = 0;
const waits = [];
bus.subscribe((e) => {
  if (e.type === 'sandbox.created') {
    active.set(e.sandbox_id, Date.now());
    maxActiveBus = Math.max(maxActiveBus, active.size);
  } else if (e.type === 'sandbox.destroyed') {
    active.delete(e.sandbox_id);
  } else if (e.type === 'spawn.dequeued') {
    waits.push(Number(e.data?.wait_ms ?? 0));
  }
});

// Independent check from the store, sampled.
let maxActiveStore = 0;
let sampling = true;
const sampler = (async () => {
  while (sampling) {
    const rows = await store.listSandboxes({ states: ['running'] });
    maxActiveStore = Math.max(maxActiveStore, rows.length);
    await sleep(2);
  }
})();

let finished = 0;
let destroyed = 0;
const t0 = performance.now();
const latencies = [];
const statuses = new Map();
const requests = Array.from({ length: REQUESTS }, async () => {
  const start = performance.now();
  const res = await fetch(`${url}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
  await res.arrayBuffer();
  latencies.push(performance.now() - start);
  statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
  finished++;
});

// Destroy the oldest live sandbox every few ms until every request has finished and all are gone.
const destroyer = (async () => {
  while (finished < REQUESTS || active.size > 0) {
    const oldest = active.keys().next().value;
    if (oldest) {
      const res = await fetch(`${url}/api/v1/sandboxes/${oldest}`, { method: 'DELETE' });
      await res.arrayBuffer();
      if (res.ok) destroyed++;
    }
    await sleep(DESTROY_EVERY_MS);
  }
})();

await Promise.all(requests);
const spawnPhaseMs = performance.now() - t0;
await destroyer;
sampling = false;
await sampler;
const stats = admission.stats({ ...locator.figures(), owner_quotas: 0 });
await plane.close();
rmSync(dir, { recursive: true, force: true });

const sortedWaits = [...waits].sort((a, b) => a - b);
const sortedLat = [...latencies].sort((a, b) => a - b);
const ok = statuses.get(201) ?? 0;
const noOverAdmission = maxActiveBus <= CAPACITY && maxActiveStore <= CAPACITY;

const rows = [
  ['spawn requests (concurrent)', String(REQUESTS)],
  ['max_sandboxes', String(CAPACITY)],
  ['destroy loop', `oldest sandbox every ${DESTROY_EVERY_MS} ms`],
  ['admitted (201)', `${ok}${ok === REQUESTS ? '' : ` — other statuses: ${JSON.stringify(Object.fromEntries(statuses))}`}`],
  ['total time, all 200 spawns answered', ms(spawnPhaseMs)],
  ['spawns that queued', String(stats.spawn_queued_total)],
  [
    'queue wait p50 / p99 / max (queued spawns)',
    `${ms(pct(sortedWaits, 50))} / ${ms(pct(sortedWaits, 99))} / ${ms(sortedWaits.at(-1) ?? 0)}`,
  ],
  ['spawn request latency p50 / p99 (all)', `${ms(pct(sortedLat, 50))} / ${ms(pct(sortedLat, 99))}`],
  ['queue timeouts', String(stats.spawn_queue_timeouts)],
  ['max concurrent active (event bus, exact)', String(maxActiveBus)],
  ['max concurrent active (store samples)', String(maxActiveStore)],
  ['over-admission', noOverAdmission ? 'none' : 'YES — BUG'],
];

console.log(`## admission

Spawn admission in \`queue\` mode on the mock provider: ${REQUESTS} concurrent \`POST /api/v1/sandboxes\`
against \`max_sandboxes=${CAPACITY}\` while a loop destroys sandboxes (${destroyed} destroyed).

| measure | value |
|---|---|
${rows.map(([k, v]) => `| ${k} | ${v} |`).join('\n')}
`);
process.exitCode = noOverAdmission && ok === REQUESTS ? 0 : 1;
