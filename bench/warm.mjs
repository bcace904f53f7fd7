#!/usr/bin/env node
// Warm pools (DESIGN §11): spawn → first exec through the sbx HTTP API, cold (a provider start) and
// warm (a ready runtime claimed), beside raw dockerode creating, starting and exec'ing a container
// with the same hardening, interleaved in one run on one engine and image.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/warm.mjs
// Env: BENCH_ITERATIONS (default 15), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { hardened, IMAGE, rawExec, removeLabelled, requireDocker, startDockerServe } from './lib/docker.mjs';
import { fmt, median, pct } from './lib/stats.mjs';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 15);
const log = (m) => process.stderr.write(`bench warm: ${m}\n`);

const docker = await requireDocker('## warm\n\n');
const serve = await startDockerServe({ SVC_DEFAULTS_WARM: '2', SVC_DEFAULTS_WARM_DESTROY_ON_SHUTDOWN: 'true' });
const client = serve.client;

async function warmReady(n) {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    const w = (await client.diagnostics()).warm ?? [];
    if ((w[0]?.ready ?? 0) >= n) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the warm pool did not fill');
}

async function sbxSpawnExec(body) {
  const t0 = performance.now();
  const { id } = await client.spawn(body);
  const r = await client.exec(id, { command: 'true' });
  const ms = performance.now() - t0;
  if (r.exit_code !== 0) throw new Error(`exec: ${JSON.stringify(r)}`);
  return { ms, id };
}

const rawLabel = `bench-warm-${randomBytes(4).toString('hex')}`;
async function rawSpawnExec() {
  const t0 = performance.now();
  const c = await docker.createContainer(hardened(rawLabel));
  await c.start();
  await rawExec(c, ['true']);
  const ms = performance.now() - t0;
  return { ms, id: c.id };
}

const cold = [];
const warm = [];
const raw = [];
try {
  await warmReady(2);
  // One of each first, not counted.
  for (const f of [() => sbxSpawnExec({ memory_mb: 128 }), () => sbxSpawnExec({}), rawSpawnExec]) {
    const r = await f();
    if (r.id.startsWith('sb-')) await client.destroy(r.id);
    else await docker.getContainer(r.id).remove({ force: true });
  }
  for (let i = 0; i < ITERATIONS; i++) {
    await warmReady(2);
    // cold: another shape (memory 128) has no pool.
    const c = await sbxSpawnExec({ memory_mb: 128 });
    cold.push(c.ms);
    const w = await sbxSpawnExec({});
    warm.push(w.ms);
    const r = await rawSpawnExec();
    raw.push(r.ms);
    await client.destroy(c.id);
    await client.destroy(w.id);
    await docker.getContainer(r.id).remove({ force: true });
    log(`${i + 1}/${ITERATIONS}: cold ${c.ms.toFixed(0)} warm ${w.ms.toFixed(1)} raw ${r.ms.toFixed(0)}`);
  }
  const d = await client.diagnostics();
  const hits = d.warm?.[0]?.hits ?? 0;
  console.log(`## warm

Spawn → first exec (\`true\`, buffered) through the sbx HTTP API with the docker provider (\`sbx serve\` in its own
process, SQLite store), cold (a shape without a warm pool: the provider creates and starts a container) and warm
(\`defaults.warm: 2\`: a ready container is claimed), beside raw dockerode creating, starting and exec'ing a
container with the same hardening; ${ITERATIONS} interleaved iterations after one warm-up (the pool refilled
between iterations), image \`${IMAGE}\`. Warm hits: ${hits} of ${ITERATIONS + 1}.

| path | p50 | p90 | / raw (p50) |
|---|---:|---:|---:|
| sbx cold | ${fmt(median(cold))} | ${fmt(pct(cold, 90))} | ${(median(cold) / median(raw)).toFixed(2)}× |
| sbx warm | ${fmt(median(warm))} | ${fmt(pct(warm, 90))} | ${(median(warm) / median(raw)).toFixed(2)}× |
| raw dockerode | ${fmt(median(raw))} | ${fmt(pct(raw, 90))} | 1.00× |

Target: warm spawn → first exec ≤ 30 ms p50 — ${median(warm) <= 30 ? 'met' : '**not met**'} (${fmt(median(warm))}; the first exec
goes through sbx-agent when it is built, else through an engine exec round trip).
`);
} finally {
  await removeLabelled(docker, rawLabel);
  await serve.stop();
}
