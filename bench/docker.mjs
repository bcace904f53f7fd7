#!/usr/bin/env node
// The docker provider through the sbx HTTP API versus raw dockerode doing the same work, side by
// side on one engine and one image: spawn-to-running, an `echo hi` exec round trip, 1 KiB and
// 10 MiB file write and read, destroy (medians of interleaved iterations), and streamed exec
// throughput of 200 MiB of stdout (NDJSON and binary frames over HTTP versus the engine's multiplexed stream).
// Usage: scripts/test-docker-up.sh && npm run build && node bench/docker.mjs
//        (prints a markdown section on stdout; progress on stderr)
// Env: BENCH_ITERATIONS (default 15), BENCH_STREAM_MIB (200), BENCH_STREAM_RUNS (3), SBX_TEST_IMAGE.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import * as tar from 'tar-stream';
import { Client } from '../dist/index.js';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 15);
const STREAM_MIB = Number(process.env.BENCH_STREAM_MIB ?? 200);
const STREAM_RUNS = Number(process.env.BENCH_STREAM_RUNS ?? 3);
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const MEMORY_MB = 256;
const KEEPALIVE = `mkdir -p /workspace 2>/dev/null; trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done`;
const BENCH_LABEL = 'sbx.bench';

const log = (msg) => process.stderr.write(`bench docker: ${msg}\n`);
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
async function timed(fn) {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

// ------------------------------------------------------------------ preconditions

const docker = new Docker({ socketPath: SOCKET });
try {
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(`## docker\n\nSkipped: no docker engine on ${SOCKET} or image ${IMAGE} missing (run scripts/test-docker-up.sh).\n`);
  process.exit(0);
}

// ------------------------------------------------------------------ sbx side: the real control plane over HTTP

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-docker-'));
const here = dirname(fileURLToPath(import.meta.url));
// `sbx serve` in its own process, as users run it: the client side (this process) and the control
// plane do not share one event loop, just as raw dockerode and dockerd do not.
const server = spawn(process.execPath, [join(here, '..', 'bin', 'sbx.js'), 'serve', '--host', '127.0.0.1', '--port', '0'], {
  cwd: dir,
  env: {
    PATH: process.env.PATH ?? '',
    HOME: dir,
    SVC_DATABASE_PATH: join(dir, 'sbx.db'),
    SVC_PROVIDERS_DEFAULT: 'docker',
    SVC_PROVIDERS_DOCKER_SOCKET_PATH: SOCKET,
    SVC_DEFAULTS_IMAGE: IMAGE,
    SVC_DEFAULTS_MEMORY_MB: String(MEMORY_MB),
    SVC_DEFAULTS_VCPUS: '1',
    SVC_LOGGING_FORMAT: 'json',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let serverLog = '';
server.stdout.on('data', (d) => (serverLog += d));
server.stderr.on('data', (d) => (serverLog += d));
const url = await new Promise((resolve, reject) => {
  const deadline = setTimeout(() => reject(new Error(`sbx serve did not start:\n${serverLog}`)), 30_000);
  const check = () => {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(serverLog);
    if (m) {
      clearTimeout(deadline);
      resolve(m[1]);
    } else if (server.exitCode !== null) {
      clearTimeout(deadline);
      reject(new Error(`sbx serve exited:\n${serverLog}`));
    } else setTimeout(check, 50);
  };
  check();
});
const stopServer = () =>
  new Promise((resolve) => {
    if (server.exitCode !== null) return resolve();
    server.once('exit', resolve);
    server.kill('SIGTERM');
    setTimeout(() => server.kill('SIGKILL'), 10_000).unref();
  });

// The sbx side speaks HTTP through sbx's own typed client (undici), the same code the CLI uses.
const client = new Client({ url });

const sbx = {
  async spawn() {
    return (await client.spawn({ image: IMAGE, memory_mb: MEMORY_MB, vcpus: 1, ttl: '30m' })).id;
  },
  async exec(id) {
    const r = await client.exec(id, { command: 'echo hi' });
    if (r.stdout !== 'hi\n' || r.exit_code !== 0) throw new Error(`sbx exec: unexpected ${JSON.stringify(r)}`);
  },
  async write(id, path, bytes) {
    // Bytes travel raw (application/octet-stream, path in the query): an sbx extension of spec 4.2.
    await client.files.write(id, path, bytes);
  },
  async read(id, path) {
    // A view, not Buffer.from(bytes), which would copy 10 MiB in the harness and bill it to sbx.
    const bytes = await client.files.read(id, path);
    return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  },
  async destroy(id) {
    await client.destroy(id);
  },
  /** Streams `bytes` of stdout as NDJSON; returns the stdout bytes received. */
  async stream(id, bytes) {
    let got = 0;
    for await (const item of client.execStream(id, { command: streamCommand(bytes) })) {
      if (item.stream === 'stdout') got += Buffer.byteLength(item.data);
    }
    return got;
  },
  /** Streams `bytes` of stdout in binary frames (Accept: application/octet-stream); returns the bytes received. */
  async streamFrames(id, bytes) {
    let got = 0;
    for await (const item of client.execBytes(id, { command: streamCommand(bytes) })) {
      if (item.stream === 'stdout') got += item.data.byteLength;
    }
    return got;
  },
};

// ------------------------------------------------------------------ raw side: dockerode doing the same work

const rawLabel = `bench-${randomBytes(4).toString('hex')}`;

function demuxCount(stream) {
  // Counts stdout payload bytes of the multiplexed stream, frame by frame.
  return new Promise((resolve, reject) => {
    let header = Buffer.alloc(0);
    let remaining = 0;
    let kind = 1;
    let out = 0;
    const text = [];
    stream.on('data', (chunk) => {
      let c = chunk;
      while (c.length > 0) {
        if (remaining > 0) {
          const take = Math.min(remaining, c.length);
          if (kind === 1) {
            out += take;
            if (out < 64) text.push(c.subarray(0, take));
          }
          remaining -= take;
          c = c.subarray(take);
          continue;
        }
        const need = 8 - header.length;
        header = Buffer.concat([header, c.subarray(0, need)]);
        c = c.subarray(need);
        if (header.length < 8) break;
        kind = header[0];
        remaining = header.readUInt32BE(4);
        header = Buffer.alloc(0);
      }
    });
    stream.on('end', () => resolve({ bytes: out, text: Buffer.concat(text).toString() }));
    stream.on('error', reject);
  });
}

async function rawExec(id, cmd) {
  const exec = await docker.getContainer(id).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ Detach: false, Tty: false });
  const res = await demuxCount(stream);
  const info = await exec.inspect();
  return { ...res, exit: info.ExitCode };
}

function tarOne(name, bytes) {
  return new Promise((resolve, reject) => {
    const pack = tar.pack();
    const chunks = [];
    pack.on('data', (c) => chunks.push(c));
    pack.on('end', () => resolve(Buffer.concat(chunks)));
    pack.on('error', reject);
    pack.entry({ name, mode: 0o644, mtime: new Date(), size: bytes.length }, bytes, (err) => (err ? reject(err) : pack.finalize()));
  });
}

function untarOne(stream) {
  return new Promise((resolve, reject) => {
    const extract = tar.extract();
    const chunks = [];
    extract.on('entry', (_h, s, next) => {
      s.on('data', (c) => chunks.push(c));
      s.on('end', next);
    });
    extract.on('finish', () => resolve(Buffer.concat(chunks)));
    extract.on('error', reject);
    stream.pipe(extract);
  });
}

const raw = {
  async spawn() {
    const c = await docker.createContainer({
      name: `sbx-raw-${randomBytes(5).toString('hex')}`,
      Image: IMAGE,
      Entrypoint: ['/bin/sh', '-c'],
      Cmd: [KEEPALIVE],
      WorkingDir: '/workspace',
      Labels: { [BENCH_LABEL]: rawLabel },
      HostConfig: {
        Memory: MEMORY_MB * 1024 * 1024,
        MemorySwap: MEMORY_MB * 1024 * 1024,
        NanoCpus: 1e9,
        PidsLimit: 256,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        NetworkMode: 'bridge',
        Init: true,
      },
    });
    await c.start();
    return c.id;
  },
  async exec(id) {
    const r = await rawExec(id, ['/bin/sh', '-c', 'echo hi']);
    if (r.text !== 'hi\n' || r.exit !== 0) throw new Error(`raw exec: unexpected ${JSON.stringify(r)}`);
  },
  async write(id, path, bytes) {
    const slash = path.lastIndexOf('/');
    await docker.getContainer(id).putArchive(await tarOne(path.slice(slash + 1), bytes), { path: path.slice(0, slash) || '/' });
  },
  async read(id, path) {
    return untarOne(await docker.getContainer(id).getArchive({ path }));
  },
  async destroy(id) {
    const c = docker.getContainer(id);
    await c.stop({ t: 2 }).catch(() => undefined);
    await c.remove({ force: true, v: true });
  },
  async stream(id, bytes) {
    return (await rawExec(id, ['/bin/sh', '-c', streamCommand(bytes)])).bytes;
  },
};

function streamCommand(bytes) {
  // Printable lines, so NDJSON carries them without escaping blow-up.
  return `yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz | head -c ${bytes}`;
}

// ------------------------------------------------------------------ measurement

const ops = ['spawn', 'exec', 'write1k', 'read1k', 'write10m', 'read10m', 'destroy'];
const samples = { sbx: Object.fromEntries(ops.map((o) => [o, []])), raw: Object.fromEntries(ops.map((o) => [o, []])) };
const small = randomBytes(1024);
const large = randomBytes(10 * 1024 * 1024);

async function cycle(side, impl) {
  const s = samples[side];
  const spawn = await timed(() => impl.spawn());
  const id = spawn.value;
  s.spawn.push(spawn.ms);
  s.exec.push((await timed(() => impl.exec(id))).ms);
  s.write1k.push((await timed(() => impl.write(id, '/workspace/small.bin', small))).ms);
  const r1 = await timed(() => impl.read(id, '/workspace/small.bin'));
  if (!r1.value.equals(small)) throw new Error(`${side}: 1 KiB read back differs`);
  s.read1k.push(r1.ms);
  s.write10m.push((await timed(() => impl.write(id, '/workspace/large.bin', large))).ms);
  const r10 = await timed(() => impl.read(id, '/workspace/large.bin'));
  if (!r10.value.equals(large)) throw new Error(`${side}: 10 MiB read back differs`);
  s.read10m.push(r10.ms);
  s.destroy.push((await timed(() => impl.destroy(id))).ms);
}

const streamMiBs = { sbx: [], frames: [], raw: [] };
try {
  // One warm-up cycle each (engine caches, JIT, first connection), not counted.
  log('warm-up');
  await cycle('sbx', sbx);
  await cycle('raw', raw);
  for (const o of ops) {
    samples.sbx[o].length = 0;
    samples.raw[o].length = 0;
  }
  for (let i = 0; i < ITERATIONS; i++) {
    log(`iteration ${i + 1}/${ITERATIONS}`);
    // Alternate which side goes first so neither always runs on a warmer engine.
    const order =
      i % 2 === 0
        ? [
            ['sbx', sbx],
            ['raw', raw],
          ]
        : [
            ['raw', raw],
            ['sbx', sbx],
          ];
    for (const [side, impl] of order) await cycle(side, impl);
  }

  log(`streaming ${STREAM_MIB} MiB x ${STREAM_RUNS}`);
  const bytes = STREAM_MIB * 1024 * 1024;
  const sbxId = await sbx.spawn();
  const rawId = await raw.spawn();
  try {
    for (let i = 0; i < STREAM_RUNS; i++) {
      for (const [side, run, id] of [
        ['sbx', (i, b) => sbx.stream(i, b), sbxId],
        ['frames', (i, b) => sbx.streamFrames(i, b), sbxId],
        ['raw', (i, b) => raw.stream(i, b), rawId],
      ]) {
        const t = await timed(() => run(id, bytes));
        if (t.value !== bytes) throw new Error(`${side} stream: got ${t.value} of ${bytes} bytes`);
        streamMiBs[side].push(STREAM_MIB / (t.ms / 1000));
      }
    }
  } finally {
    await sbx.destroy(sbxId).catch(() => undefined);
    await raw.destroy(rawId).catch(() => undefined);
  }
} finally {
  await client.close().catch(() => undefined);
  await stopServer();
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`${BENCH_LABEL}=${rawLabel}`] } });
  for (const c of leftovers)
    await docker
      .getContainer(c.Id)
      .remove({ force: true, v: true })
      .catch(() => undefined);
  rmSync(dir, { recursive: true, force: true });
}

// ------------------------------------------------------------------ report

const labels = {
  spawn: 'spawn → running',
  exec: 'exec `echo hi` (buffered round trip)',
  write1k: 'write 1 KiB',
  read1k: 'read 1 KiB',
  write10m: 'write 10 MiB',
  read10m: 'read 10 MiB',
  destroy: 'destroy',
};
const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(1));
const rows = ops.map((o) => {
  const a = median(samples.sbx[o]);
  const b = median(samples.raw[o]);
  return `| ${labels[o]} | ${fmt(a)} ms | ${fmt(b)} ms | ${(a / b).toFixed(2)}× |`;
});
// The file operations' target: sbx within 15% of raw dockerode doing the same transfer.
const TARGET = 1.15;
const targets = ['write1k', 'read1k', 'write10m', 'read10m'].map((o) => {
  const r = median(samples.sbx[o]) / median(samples.raw[o]);
  return `- ${labels[o]}: ${r.toFixed(3)}× — ${r <= TARGET ? 'met' : '**not met**'}`;
});
const sa = median(streamMiBs.sbx);
const sf = median(streamMiBs.frames);
const sr = median(streamMiBs.raw);
const engine = await docker.version().catch(() => ({}));
console.log(`## docker

sbx HTTP API (\`sbx serve\` in its own process on 127.0.0.1, SQLite store, docker provider) versus raw dockerode doing
the same work, on one engine (Docker ${engine.Version ?? '?'}, runtime runc) and image \`${IMAGE}\`. Latencies
are medians of ${ITERATIONS} interleaved iterations after one warm-up; the sbx side is sbx's typed client over HTTP and includes JSON,
validation, the store write and events. The sbx side runs exec and files through sbx-agent in the
container when it is built (\`providers.docker.agent: auto\`, the default; section agent compares it
with the engine path), the raw side through the engine exec and archive APIs (sbx writes send the raw
bytes as an \`application/octet-stream\` body, path in the query; reads answer raw bytes). The raw
container has the same limits and hardening as an sbx sandbox.

| operation | sbx (HTTP API) | raw dockerode | sbx / raw |
|---|---:|---:|---:|
${rows.join('\n')}

Targets, sbx / raw ≤ ${TARGET}× for file transfers:
${targets.join('\n')}

Streamed exec of ${STREAM_MIB} MiB of stdout (median of ${STREAM_RUNS}, interleaved): sbx NDJSON over HTTP ${fmt(sa)} MiB/s
(${(sa / sr).toFixed(2)}× raw), sbx binary frames over HTTP (what \`sbx exec\` uses) ${fmt(sf)} MiB/s
(${(sf / sr).toFixed(2)}× raw; target ≥ 1.0), raw engine stream ${fmt(sr)} MiB/s.
`);
