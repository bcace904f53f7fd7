#!/usr/bin/env node
// Fork (DESIGN §16) on docker: `POST …/fork` of a sandbox holding 100 MB of files (answered once the
// fork runs) beside the same work done by hand with dockerode — `docker commit` (paused) of a
// container holding the same 100 MB, `docker create` from the image with the same hardening,
// `docker start` — interleaved in one run on one engine and image. Each iteration's fork and image
// are removed before the next (sbx removes its fork image with the last fork).
// Usage: scripts/test-docker-up.sh && npm run build && node bench/fork.mjs
// Env: BENCH_ITERATIONS (default 7), BENCH_FORK_MB (default 100), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { hardened, IMAGE, rawExec, removeLabelled, requireDocker, startDockerServe } from './lib/docker.mjs';
import { fmt, median, pct } from './lib/stats.mjs';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 7);
const MB = Number(process.env.BENCH_FORK_MB ?? 100);
// Random bytes (no layer compresses them away), in ten files.
const FILL =
  `mkdir -p /workspace/data && for i in 0 1 2 3 4 5 6 7 8 9; do head -c ${MB * 104857} /dev/urandom ` +
  `> /workspace/data/f$i; done && du -sm /workspace/data`;
const log = (m) => process.stderr.write(`bench fork: ${m}\n`);

const docker = await requireDocker('## pause, fork, watch\n\n### fork\n\n');
const serve = await startDockerServe();
const client = serve.client;
const rawLabel = `bench-fork-${randomBytes(4).toString('hex')}`;

async function sbxFork(parentId) {
  const t0 = performance.now();
  const [fork] = await client.fork(parentId);
  return { ms: performance.now() - t0, id: fork.id };
}

async function rawFork(source) {
  const repo = `sbx-bench-fork/${randomBytes(5).toString('hex')}`;
  const t0 = performance.now();
  const committed = await source.commit({
    _query: { container: source.id, repo, tag: 'latest', pause: true },
    _body: { Labels: { 'sbx.bench': rawLabel } },
  });
  const c = await docker.createContainer(hardened(rawLabel, committed.Id));
  await c.start();
  return { ms: performance.now() - t0, container: c, image: committed.Id };
}

const sbx = [];
const raw = [];
try {
  const parent = await client.spawn({});
  const filled = await client.exec(parent.id, { command: FILL, timeout: '5m' });
  if (filled.exit_code !== 0) throw new Error(`fill: ${JSON.stringify(filled)}`);
  const source = await docker.createContainer(hardened(rawLabel));
  await source.start();
  const code = await rawExec(source, FILL);
  if (code !== 0) throw new Error(`raw fill failed (${code})`);
  log(`parent ${parent.id} and raw source hold ${filled.stdout.trim()}`);
  // One of each first, not counted.
  for (let i = -1; i < ITERATIONS; i++) {
    const s = await sbxFork(parent.id);
    const r = await rawFork(source);
    await client.destroy(s.id);
    await r.container.remove({ force: true });
    await docker.getImage(r.image).remove({ force: true });
    if (i < 0) continue;
    sbx.push(s.ms);
    raw.push(r.ms);
    log(`${i + 1}/${ITERATIONS}: sbx ${s.ms.toFixed(0)} ms, raw ${r.ms.toFixed(0)} ms`);
  }
  await client.destroy(parent.id);
  console.log(`## pause, fork, watch

### fork

\`POST /api/v1/sandboxes/{id}/fork\` (count 1, answered once the fork runs) of a docker sandbox holding ${MB} MB of
random files under /workspace, through the typed client against \`sbx serve\` in its own process (SQLite store),
beside the same work by hand with dockerode on a container holding the same ${MB} MB: \`docker commit\` (paused),
\`docker create\` from the image with the same hardening, \`docker start\`. ${ITERATIONS} interleaved iterations after
one warm-up, each fork and image removed before the next; image \`${IMAGE}\`.

| path | p50 | p90 | / by hand (p50) |
|---|---:|---:|---:|
| sbx fork | ${fmt(median(sbx))} | ${fmt(pct(sbx, 90))} | ${(median(sbx) / median(raw)).toFixed(2)}× |
| commit + create + start by hand | ${fmt(median(raw))} | ${fmt(pct(raw, 90))} | 1.00× |
`);
} finally {
  await removeLabelled(docker, rawLabel, { images: true });
  await serve.stop();
}
