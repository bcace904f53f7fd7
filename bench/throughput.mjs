#!/usr/bin/env node
// Exec throughput with 1, 4 and 16 concurrent clients: `echo hi` through the sbx HTTP API (docker
// provider, sbx-agent when built) beside raw dockerode exec on a container with the same hardening,
// interleaved per concurrency level in one run on one engine and image.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/throughput.mjs
// Env: BENCH_EXECS_PER_CLIENT (default 20), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { hardened, rawExec, requireDocker, startDockerServe } from './lib/docker.mjs';

const PER_CLIENT = Number(process.env.BENCH_EXECS_PER_CLIENT ?? 20);
const LEVELS = [1, 4, 16];
const log = (m) => process.stderr.write(`bench throughput: ${m}\n`);

const docker = await requireDocker('## throughput\n\n');
const serve = await startDockerServe();
const client = serve.client;
const rawLabel = `bench-tp-${randomBytes(4).toString('hex')}`;
const rawEcho = async (c) => {
  if ((await rawExec(c, 'echo hi')) !== 0) throw new Error('raw exec failed');
};

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
  raw = await docker.createContainer(hardened(rawLabel));
  await raw.start();
  const sbxOne = async () => {
    const r = await client.exec(sbxId, { command: 'echo hi' });
    if (r.exit_code !== 0 || r.stdout !== 'hi\n') throw new Error(`sbx exec: ${JSON.stringify(r)}`);
  };
  await sbxOne();
  await rawEcho(raw);
  const cfg = (await client.providers.get('docker')).config ?? {};
  const rows = [];
  for (const c of LEVELS) {
    const s = await rate(c, sbxOne);
    const r = await rate(c, () => rawEcho(raw));
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
  await serve.stop();
}
