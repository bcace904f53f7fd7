#!/usr/bin/env node
// sbx-agent (DESIGN §11, docs/agent.md) versus the engine paths, on one container, interleaved in
// one run: an `echo hi` exec through the agent, through the engine exec API (providers.docker.agent:
// off, the same container) and raw dockerode (create + start + inspect); 1 KiB and 10 MiB file
// write and read through the agent, through the engine path, and raw (put/get archive).
// Provider level (in process, no HTTP): what the agent changes, without the API around it.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/agent.mjs
// Env: BENCH_ITERATIONS (default 30; 10 MiB rows take a third), SBX_TEST_IMAGE.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import * as tar from 'tar-stream';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 30);
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const here = dirname(fileURLToPath(import.meta.url));
const log = (msg) => process.stderr.write(`bench agent: ${msg}\n`);
const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

const docker = new Docker({ socketPath: SOCKET });
try {
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(`## agent\n\nSkipped: no docker engine on ${SOCKET} or image ${IMAGE} missing (run scripts/test-docker-up.sh).\n`);
  process.exit(0);
}
const { createDockerProvider } = await import('../dist/adapters/providers/docker/index.js');
const { defaultAgentBinary } = await import('../dist/adapters/providers/docker/options.js');
const binary = defaultAgentBinary();
if (!binary || !existsSync(binary)) {
  console.log('## agent\n\nSkipped: sbx-agent is not built (npm run build needs gcc or cc with a static libc).\n');
  process.exit(0);
}

const installationId = `sbx-bench-agent-${randomBytes(4).toString('hex')}`;
const stateDir = mkdtempSync(join(tmpdir(), 'sbx-bench-agent-'));
const withAgent = createDockerProvider({ socketPath: SOCKET, installationId, agent: 'auto', agentDir: stateDir });
const engine = createDockerProvider({ socketPath: SOCKET, installationId, agent: 'off' });

async function execOnce(p, rid) {
  let out = '';
  for await (const e of p.exec(rid, { command: 'echo', args: ['hi'], mode: 'argv', env: {} }, AbortSignal.timeout(30_000))) {
    if (e.stream === 'stdout') out += Buffer.from(e.data).toString();
  }
  if (out !== 'hi\n') throw new Error(`exec answered ${JSON.stringify(out)}`);
}

async function rawExec(rid) {
  const exec = await docker
    .getContainer(rid)
    .exec({ Cmd: ['echo', 'hi'], AttachStdout: true, AttachStderr: true, WorkingDir: '/workspace' });
  const stream = await exec.start({ Detach: false, Tty: false });
  for await (const _ of stream) void _;
  await exec.inspect();
}

function tarOf(name, data) {
  const pack = tar.pack();
  pack.entry({ name, size: data.length, mode: 0o644 }, data);
  pack.finalize();
  return pack;
}

async function rawWrite(rid, path, data) {
  await docker.getContainer(rid).putArchive(tarOf(path.split('/').pop(), data), { path: dirname(path) });
}

async function rawRead(rid, path) {
  const stream = await docker.getContainer(rid).getArchive({ path });
  const extract = tar.extract();
  const chunks = [];
  const done = new Promise((resolve, reject) => {
    extract.on('entry', (_h, s, next) => {
      s.on('data', (c) => chunks.push(c));
      s.on('end', next);
      s.resume();
    });
    extract.on('finish', resolve);
    extract.on('error', reject);
  });
  stream.pipe(extract);
  await done;
  return Buffer.concat(chunks);
}

let rid;
const rows = [];
try {
  rid = (
    await withAgent.spawn({ sandbox_id: `bench-${installationId}`, image: IMAGE, memory_mb: 256, vcpus: 1 }, AbortSignal.timeout(60_000))
  ).runtime_id;
  const small = randomBytes(1024);
  const big = randomBytes(10 * 1024 * 1024);
  const cases = [
    {
      group: 'exec `echo hi`',
      n: ITERATIONS,
      ways: { agent: () => execOnce(withAgent, rid), engine: () => execOnce(engine, rid), raw: () => rawExec(rid) },
    },
    ...[
      ['1 KiB', small, ITERATIONS],
      ['10 MiB', big, Math.max(3, Math.round(ITERATIONS / 3))],
    ].flatMap(([label, data, n]) => [
      {
        group: `write ${label}`,
        n,
        ways: {
          agent: () => withAgent.writeFile(rid, '/workspace/a.bin', data, 0o644),
          engine: () => engine.writeFile(rid, '/workspace/e.bin', data, 0o644),
          raw: () => rawWrite(rid, '/workspace/r.bin', data),
        },
      },
      {
        group: `read ${label}`,
        n,
        ways: {
          agent: async () => check(await withAgent.readFile(rid, '/workspace/a.bin'), data),
          engine: async () => check(await engine.readFile(rid, '/workspace/e.bin'), data),
          raw: async () => check(await rawRead(rid, '/workspace/r.bin'), data),
        },
      },
    ]),
  ];
  function check(got, want) {
    if (Buffer.compare(Buffer.from(got), want) !== 0) throw new Error('read back different bytes');
  }
  for (const c of cases) {
    const times = { agent: [], engine: [], raw: [] };
    for (const fn of Object.values(c.ways)) await fn(); // warm-up, and the files for the reads
    log(`${c.group} × ${c.n}`);
    for (let i = 0; i < c.n; i++) {
      // Interleaved, rotating which goes first.
      const order = ['agent', 'engine', 'raw'];
      for (let k = 0; k < i % 3; k++) order.push(order.shift());
      for (const way of order) {
        const t0 = performance.now();
        await c.ways[way]();
        times[way].push(performance.now() - t0);
      }
    }
    rows.push({ group: c.group, n: c.n, times });
  }
} finally {
  if (rid) await withAgent.destroy(rid, AbortSignal.timeout(60_000)).catch(() => undefined);
  await withAgent.close?.();
  await engine.close?.();
  rmSync(stateDir, { recursive: true, force: true });
}

const f = (ms) => (ms < 10 ? ms.toFixed(2) : ms.toFixed(1));
const targets = { 'exec `echo hi`': 3, 'write 1 KiB': 5, 'read 1 KiB': 5 };
const out = [];
out.push('## agent');
out.push('');
out.push(
  `sbx-agent (docs/agent.md) against the engine paths, provider level (in process, no HTTP), one container, ` +
    `interleaved in one run; p50 (p90) in ms. "engine" is the same provider with \`providers.docker.agent: off\`; ` +
    `"raw" is dockerode alone (exec create/start/inspect; put/get archive). Targets (issue 16): agent exec ≤ 3 ms ` +
    `p50, 1 KiB write/read ≤ 5 ms p50.`,
);
out.push('');
out.push('| operation | n | agent | engine | raw docker | agent / engine | agent / raw | target |');
out.push('|---|---:|---:|---:|---:|---:|---:|---|');
for (const r of rows) {
  const [a, e, w] = ['agent', 'engine', 'raw'].map((k) => pct(r.times[k], 0.5));
  const [a9, e9, w9] = ['agent', 'engine', 'raw'].map((k) => pct(r.times[k], 0.9));
  const t = targets[r.group];
  const target = t === undefined ? '' : `≤ ${t} ms: ${a <= t ? 'met' : 'missed'}`;
  out.push(
    `| ${r.group} | ${r.n} | ${f(a)} (${f(a9)}) | ${f(e)} (${f(e9)}) | ${f(w)} (${f(w9)}) | ` +
      `${(a / e).toFixed(2)}× | ${(a / w).toFixed(2)}× | ${target} |`,
  );
}
out.push('');
console.log(out.join('\n'));
