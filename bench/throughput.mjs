#!/usr/bin/env node
// Exec throughput with 1, 4 and 16 concurrent clients: `echo hi` through the sbx HTTP API (docker
// provider, sbx-agent when built) beside raw dockerode exec on a container with the same hardening,
// interleaved per concurrency level in one run on one engine and image.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/throughput.mjs
// Env: BENCH_EXECS_PER_CLIENT (default 20), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { Client } from '../dist/index.js';
import { processes } from './lib/procs.mjs';

const PER_CLIENT = Number(process.env.BENCH_EXECS_PER_CLIENT ?? 20);
const LEVELS = [1, 4, 16];
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const KEEPALIVE = `mkdir -p /workspace 2>/dev/null; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`;
const log = (m) => process.stderr.write(`bench throughput: ${m}\n`);

const docker = new Docker({ socketPath: SOCKET });
try {
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(`## throughput\n\nSkipped: no docker engine on ${SOCKET} or image ${IMAGE} missing (run scripts/test-docker-up.sh).\n`);
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
const rawLabel = `bench-tp-${randomBytes(4).toString('hex')}`;

async function rawExec(c) {
  const exec = await c.exec({ Cmd: ['/bin/sh', '-c', 'echo hi'], AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ Detach: false, Tty: false });
  await new Promise((resolve, reject) => {
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.resume();
  });
  const info = await exec.inspect();
  if (info.ExitCode !== 0) throw new Error('raw exec failed');
}

async function rate(clients, one) {
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < PER_CLIENT; i++) await one();
    }),
  );
  return (clients * PER_CLIENT) / ((performance.now() - t0) / 1000);
}

let sbxId;
let raw;
try {
  sbxId = (await client.spawn({})).id;
  raw = await docker.createContainer({
    name: `sbx-raw-${randomBytes(5).toString('hex')}`,
    Image: IMAGE,
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
  await raw.start();
  const sbxOne = async () => {
    const r = await client.exec(sbxId, { command: 'echo hi' });
    if (r.exit_code !== 0 || r.stdout !== 'hi\n') throw new Error(`sbx exec: ${JSON.stringify(r)}`);
  };
  await sbxOne();
  await rawExec(raw);
  const cfg = (await client.providers.get('docker')).config ?? {};
  const rows = [];
  for (const c of LEVELS) {
    const s = await rate(c, sbxOne);
    const r = await rate(c, () => rawExec(raw));
    log(`${c} clients: sbx ${s.toFixed(1)}/s raw ${r.toFixed(1)}/s`);
    rows.push(`| ${c} | ${s.toFixed(1)} | ${r.toFixed(1)} | ${(s / r).toFixed(2)}× |`);
  }
  console.log(`## throughput

Exec throughput (\`echo hi\`, buffered) with 1, 4 and 16 concurrent clients, each running ${PER_CLIENT} execs back to
back: sbx's typed client over HTTP against \`sbx serve\` (docker provider, agent ${cfg.agent ?? 'n/a'}) beside raw dockerode exec
(create, start, inspect) on a container with the same hardening, one container each; interleaved per level in one run.

| clients | sbx execs/s | raw execs/s | sbx / raw |
|---:|---:|---:|---:|
${rows.join('\n')}
`);
} finally {
  if (sbxId) await client.destroy(sbxId).catch(() => undefined);
  if (raw) await raw.remove({ force: true }).catch(() => undefined);
  await procs.stop();
  procs.cleanup();
}
