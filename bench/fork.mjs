#!/usr/bin/env node
// Fork (DESIGN §16) on docker: `POST …/fork` of a sandbox holding 100 MB of files (answered once the
// fork runs) beside the same work done by hand with dockerode — `docker commit` (paused) of a
// container holding the same 100 MB, `docker create` from the image with the same hardening,
// `docker start` — interleaved in one run on one engine and image. Each iteration's fork and image
// are removed before the next (sbx removes its fork image with the last fork).
// Usage: scripts/test-docker-up.sh && npm run build && node bench/fork.mjs
// Env: BENCH_ITERATIONS (default 7), BENCH_FORK_MB (default 100), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Client } from '../dist/index.js';
import { processes } from './lib/procs.mjs';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 7);
const MB = Number(process.env.BENCH_FORK_MB ?? 100);
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const KEEPALIVE = `mkdir -p /workspace 2>/dev/null; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`;
// Random bytes (no layer compresses them away), in ten files.
const FILL =
  `mkdir -p /workspace/data && for i in 0 1 2 3 4 5 6 7 8 9; do head -c ${MB * 104857} /dev/urandom ` +
  `> /workspace/data/f$i; done && du -sm /workspace/data`;
const log = (m) => process.stderr.write(`bench fork: ${m}\n`);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => pct(xs, 50);
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`);

const docker = new Docker({ socketPath: SOCKET });
try {
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(
    `## pause, fork, watch\n\n### fork\n\nSkipped: no docker engine on ${SOCKET} or image ${IMAGE} missing ` +
      `(run scripts/test-docker-up.sh).\n`,
  );
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-'));
const procs = processes(dir);
const url = await procs.start(
  'serve',
  ['serve', '--host', '127.0.0.1', '--port', '0'],
  {
    SVC_DATABASE_PATH: join(dir, 'serve', 'sbx.db'),
    SVC_PROVIDERS_DEFAULT: 'docker',
    SVC_PROVIDERS_DOCKER_SOCKET_PATH: SOCKET,
    SVC_DEFAULTS_IMAGE: IMAGE,
    SVC_DEFAULTS_MEMORY_MB: '256',
  },
  /listening on (http:\/\/127\.0\.0\.1:\d+)/,
);
const client = new Client({ url });
const rawLabel = `bench-fork-${randomBytes(4).toString('hex')}`;
const hardened = (image) => ({
  name: `sbx-raw-${randomBytes(5).toString('hex')}`,
  Image: image,
  Entrypoint: ['/bin/sh', '-c'],
  Cmd: [KEEPALIVE],
  WorkingDir: '/workspace',
  Labels: { 'sbx.bench': rawLabel },
  HostConfig: {
    Memory: 256 * 2 ** 20,
    MemorySwap: 256 * 2 ** 20,
    NanoCpus: 1e9,
    PidsLimit: 256,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    NetworkMode: 'bridge',
    Init: true,
  },
});

async function rawExec(c, cmd) {
  const exec = await c.exec({ Cmd: ['sh', '-c', cmd], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ Detach: false, Tty: false });
  await new Promise((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
  const { ExitCode } = await exec.inspect();
  if (ExitCode !== 0) throw new Error(`raw exec failed (${ExitCode}): ${cmd}`);
}

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
  const c = await docker.createContainer(hardened(committed.Id));
  await c.start();
  return { ms: performance.now() - t0, container: c, image: committed.Id };
}

const sbx = [];
const raw = [];
try {
  const parent = await client.spawn({});
  const filled = await client.exec(parent.id, { command: FILL, timeout: '5m' });
  if (filled.exit_code !== 0) throw new Error(`fill: ${JSON.stringify(filled)}`);
  const source = await docker.createContainer(hardened(IMAGE));
  await source.start();
  await rawExec(source, FILL);
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
  for (const c of await docker.listContainers({ all: true, filters: { label: [`sbx.bench=${rawLabel}`] } }))
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  for (const img of await docker.listImages({ filters: { label: [`sbx.bench=${rawLabel}`] } }))
    await docker
      .getImage(img.Id)
      .remove({ force: true })
      .catch(() => undefined);
  await procs.stop();
  procs.cleanup();
}
