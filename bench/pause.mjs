#!/usr/bin/env node
// Pause and resume (DESIGN.md §16): `POST …/pause` and `…/resume` through the sbx HTTP API on a
// docker sandbox beside the engine's own pause and unpause (dockerode, the API `docker pause` calls)
// of a raw container of the same image, interleaved in one run on one engine; the same on mock (the
// cgroup freezer); and the first exec after an auto-pause (it pays the resume) beside an exec into
// the running sandbox.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/pause.mjs
// Env: BENCH_ITERATIONS (default 20), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Client } from '../dist/index.js';
import { processes } from './lib/procs.mjs';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 20);
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const KEEPALIVE = `trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`;
const log = (m) => process.stderr.write(`bench pause: ${m}\n`);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const median = (xs) => pct(xs, 50);
const fmt = (ms) => (ms >= 100 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(1)} ms`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const timed = async (f) => {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
};

const docker = new Docker({ socketPath: SOCKET });
try {
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(
    `## pause, fork, watch\n\nSkipped: no docker engine on ${SOCKET} or image ${IMAGE} missing (run scripts/test-docker-up.sh).\n`,
  );
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-pause-'));
const procs = processes(dir);
const url = await procs.start(
  'serve',
  ['serve', '--host', '127.0.0.1', '--port', '0'],
  {
    SVC_DATABASE_PATH: join(dir, 'serve', 'sbx.db'),
    SVC_PROVIDERS_DEFAULT: 'docker',
    SVC_PROVIDERS_DOCKER_SOCKET_PATH: SOCKET,
    SVC_PROVIDERS_MOCK_ENABLED: 'true',
    SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'mock'),
    SVC_DEFAULTS_IMAGE: IMAGE,
    SVC_DEFAULTS_MEMORY_MB: '256',
  },
  /listening on (http:\/\/127\.0\.0\.1:\d+)/,
);
const client = new Client({ url });

const raw = await docker.createContainer({
  name: `sbx-raw-${randomBytes(5).toString('hex')}`,
  Image: IMAGE,
  Entrypoint: ['/bin/sh', '-c'],
  Cmd: [KEEPALIVE],
  Labels: { 'sbx.bench': 'pause' },
  HostConfig: { Memory: 256 * 2 ** 20, NanoCpus: 1e9, PidsLimit: 256, CapDrop: ['ALL'], Init: true },
});
await raw.start();

const rows = { sbxPause: [], sbxResume: [], rawPause: [], rawUnpause: [], mockPause: [], mockResume: [], firstExec: [], normalExec: [] };
const made = [];
try {
  const sb = await client.spawn({});
  const mock = await client.spawn({ provider: 'mock' });
  made.push(sb.id, mock.id);
  // A process that keeps running, so there is something to freeze.
  for (const id of [sb.id, mock.id]) await client.exec(id, { command: 'sh -c "while :; do sleep 1; done" >/dev/null 2>&1 &' });
  // One of each first, not counted.
  await client.pause(sb.id);
  await client.resume(sb.id);
  await raw.pause();
  await raw.unpause();
  await client.pause(mock.id);
  await client.resume(mock.id);
  for (let i = 0; i < ITERATIONS; i++) {
    rows.sbxPause.push(await timed(() => client.pause(sb.id)));
    rows.rawPause.push(await timed(() => raw.pause()));
    rows.sbxResume.push(await timed(() => client.resume(sb.id)));
    rows.rawUnpause.push(await timed(() => raw.unpause()));
    rows.mockPause.push(await timed(() => client.pause(mock.id)));
    rows.mockResume.push(await timed(() => client.resume(mock.id)));
  }
  log('pause/resume done; auto-pause …');

  // The first exec after an auto-pause, and an exec right after it into the running sandbox.
  const napper = await client.spawn({ auto_pause: '1s' });
  made.push(napper.id);
  await client.exec(napper.id, { command: 'true' });
  const autoRuns = Math.max(5, Math.floor(ITERATIONS / 2));
  for (let i = 0; i < autoRuns; i++) {
    const end = Date.now() + 10_000;
    while ((await client.get(napper.id)).state !== 'paused') {
      if (Date.now() > end) throw new Error('the sandbox was not auto-paused');
      await sleep(50);
    }
    rows.firstExec.push(await timed(() => client.exec(napper.id, { command: 'true' })));
    rows.normalExec.push(await timed(() => client.exec(napper.id, { command: 'true' })));
  }
} finally {
  for (const id of made) await client.destroy(id).catch(() => undefined);
  await raw.remove({ force: true }).catch(() => undefined);
  await procs.stop();
}

const line = (what, xs, base) =>
  `| ${what} | ${fmt(median(xs))} | ${fmt(pct(xs, 90))} | ${base ? `${(median(xs) / median(base)).toFixed(2)}×` : ''} |`;
console.log(`## pause, fork, watch

Pause and resume (DESIGN.md §16), one \`sbx serve\` on docker (image \`${IMAGE}\`, a sandbox with a
background loop) beside the engine's own pause and unpause of a raw container of the same image
(dockerode: the API \`docker pause\` calls), interleaved, ${ITERATIONS} rounds after one warm-up;
mock through the cgroup freezer on the same server. The first exec after an auto-pause
(\`auto_pause: 1s\`) pays the resume; the exec after it runs into the running sandbox.
\`node bench/pause.mjs\`, ${new Date().toISOString().slice(0, 10)}.

| operation | p50 | p90 | ratio |
|---|---|---|---|
${line('docker: engine pause (raw container)', rows.rawPause)}
${line('docker: sbx pause', rows.sbxPause, rows.rawPause)}
${line('docker: engine unpause (raw container)', rows.rawUnpause)}
${line('docker: sbx resume', rows.sbxResume, rows.rawUnpause)}
${line('mock: sbx pause (freezer)', rows.mockPause)}
${line('mock: sbx resume (freezer)', rows.mockResume)}
${line('docker: exec `true`, running', rows.normalExec)}
${line('docker: first exec `true` after an auto-pause', rows.firstExec, rows.normalExec)}
`);
