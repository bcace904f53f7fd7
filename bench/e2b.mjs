#!/usr/bin/env node
// E2B's SDK (the `e2b` package, unmodified) against a real `sbx serve`: `commands.run('true')`
// through the envd plane (E2B_SANDBOX_URL mode) beside sbx's own typed client exec of `true` on
// the same sandbox, iterations interleaved so machine noise hits both alike. Mock provider, and
// docker when the engine and the E2B test image (sbx-test/e2b, built by the docker envd test) exist.
// Usage: npm run build && node bench/e2b.mjs   (markdown on stdout; progress on stderr)
// Env: BENCH_RUNS (per path and provider, default 200), BENCH_FILE_RUNS (10 MiB writes and reads, default 10).
import { existsSync, mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { Sandbox } from 'e2b';
import { processes } from './lib/procs.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const FILE_RUNS = Number(process.env.BENCH_FILE_RUNS ?? 10);
const KEY = 'e2b_00112233445566778899aabbccddeeff00112233';
const E2B_IMAGE = 'sbx-test/e2b:latest';
const log = (m) => process.stderr.write(`bench e2b: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## e2b\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}
const { Client } = await import('../dist/index.js');

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};

async function measure(provider, env) {
  const dir = mkdtempSync(join(tmpdir(), `sbx-bench-e2b-${provider}-`));
  const procs = processes(dir);
  const url = await procs.start(
    'serve',
    ['serve', '--host', '127.0.0.1', '--port', '0'],
    { SVC_DATABASE_PATH: join(dir, 'serve', 'sbx.db'), SVC_PROVIDERS_DEFAULT: provider, ...env },
    /listening on (http:\/\/127\.0\.0\.1:\d+)/,
  );
  try {
    const opts = {
      apiUrl: `${url}/e2b`,
      sandboxUrl: `${url}/e2b/sandbox`,
      apiKey: KEY,
      domain: `localhost:${new URL(url).port}`,
      retries: 0,
    };
    const sbx = await Sandbox.create({ ...opts, timeoutMs: 600_000 });
    const client = new Client({ url });
    const sdk = [];
    const sdkRoot = [];
    const native = [];
    for (let i = 0; i < 10; i++) {
      await sbx.commands.run('true');
      await client.exec(sbx.sandboxId, { command: 'true' });
    }
    for (let i = 0; i < RUNS; i++) {
      let t = performance.now();
      await sbx.commands.run('true');
      sdk.push(performance.now() - t);
      t = performance.now();
      await sbx.commands.run('true', { user: 'root' });
      sdkRoot.push(performance.now() - t);
      t = performance.now();
      const r = await client.exec(sbx.sandboxId, { command: 'true' });
      native.push(performance.now() - t);
      if (r.exit_code !== 0) throw new Error(`native exec exit ${r.exit_code}`);
    }
    // 10 MiB written and read: the SDK as `user` (on docker a command as that user writes it, so the
    // file is the user's), as root (the engine's archive API), and the typed client.
    const big = new Uint8Array(10 * 1024 * 1024).map((_, i) => (i * 7) & 0xff);
    const files = { write: [], writeRoot: [], nativeWrite: [], read: [], nativeRead: [] };
    for (let i = 0; i < FILE_RUNS; i++) {
      let t = performance.now();
      await sbx.files.write('/tmp/bench.bin', big.buffer);
      files.write.push(performance.now() - t);
      t = performance.now();
      await sbx.files.write('/tmp/bench-root.bin', big.buffer, { user: 'root' });
      files.writeRoot.push(performance.now() - t);
      t = performance.now();
      await client.files.write(sbx.sandboxId, '/tmp/bench-native.bin', big);
      files.nativeWrite.push(performance.now() - t);
      t = performance.now();
      const got = await sbx.files.read('/tmp/bench.bin', { format: 'bytes' });
      files.read.push(performance.now() - t);
      if (got.byteLength !== big.byteLength) throw new Error(`read ${got.byteLength} bytes`);
      t = performance.now();
      await client.files.read(sbx.sandboxId, '/tmp/bench-native.bin');
      files.nativeRead.push(performance.now() - t);
    }
    await sbx.kill();
    return { sdk, sdkRoot, native, files };
  } finally {
    await procs.stop();
    procs.cleanup();
  }
}

const rows = [];
log(`mock, ${RUNS} runs per path`);
rows.push(['mock', await measure('mock', { SVC_PROVIDERS_MOCK_ROOT_DIR: join(tmpdir(), `sbx-bench-e2b-mock-${process.pid}`) })]);
try {
  const docker = new Docker();
  await docker.getImage(E2B_IMAGE).inspect();
  log(`docker (${E2B_IMAGE}), ${RUNS} runs per path`);
  rows.push(['docker', await measure('docker', { SVC_DEFAULTS_IMAGE: E2B_IMAGE, SVC_DEFAULTS_MEMORY_MB: '256' })]);
} catch (err) {
  log(`docker skipped: ${err.message}`);
}

const f = (n) => n.toFixed(2);
const FILES_HEAD = [
  '| provider | SDK write as user (ms) | SDK write as root | typed client write | user / client | root / client |',
  ' SDK read | typed client read | read / client |\n|---|---|---|---|---|---|---|---|---|',
].join('');
const filesRow = (p, x) => {
  const m = (xs) => pct(xs, 50);
  const cells = [m(x.write), m(x.writeRoot), m(x.nativeWrite), m(x.write) / m(x.nativeWrite), m(x.writeRoot) / m(x.nativeWrite)];
  cells.push(m(x.read), m(x.nativeRead), m(x.read) / m(x.nativeRead));
  return `| ${p} | ${cells.map(f).join(' | ')} |`;
};
const commandRow = (p, r) => {
  const cells = [p, f(pct(r.sdk, 50)), f(pct(r.sdk, 99)), f(pct(r.sdkRoot, 50)), f(pct(r.native, 50)), f(pct(r.native, 99))];
  cells.push(f(pct(r.sdk, 50) / pct(r.native, 50)), f(pct(r.sdkRoot, 50) / pct(r.native, 50)));
  return `| ${cells.join(' | ')} |`;
};
const sdkVersion = JSON.parse((await import('node:fs')).readFileSync(join(ROOT, 'node_modules/e2b/package.json'), 'utf8')).version;
console.log(`## e2b

\`commands.run('true')\` through E2B's own JS SDK (\`e2b\` ${sdkVersion}, unmodified; envd plane under
\`/e2b/sandbox\`, Connect over HTTP/1.1) beside \`client.exec(id, {command: 'true'})\` of sbx's typed client on
the same sandbox of one \`sbx serve\`, interleaved, ${RUNS} runs each after 10 warm-up runs. ${cpus().length} CPUs, Node ${process.version}.
An SDK command is an sbx background process (so \`list\`, \`connect\`, stdin and \`kill\` work on it) run as
\`/bin/bash -l -c true\` as the image's \`user\`: a process record, an output log and a login shell more
than a bare exec of \`true\`. On docker a command as \`root\` takes the container's sbx-agent, one as \`user\`
(uid 1000) a second agent started as that user on its first exec (docs/agent.md), not the engine's exec API.

| provider | SDK p50 (ms) | SDK p99 | SDK as root p50 | typed client p50 (ms) | typed client p99 | SDK / client (p50) | as root / client |
|---|---|---|---|---|---|---|---|
${rows.map(([p, r]) => commandRow(p, r)).join('\n')}

10 MiB written and read through the SDK (\`files.write\` as \`user\`, as \`root\`; \`files.read\`) beside the typed
client's \`files.write\`/\`files.read\`, interleaved, median of ${FILE_RUNS}. A write as \`user\` is done by that user
(a command of its uid copies the body in, so the file is the user's and its permissions apply, as on E2B);
as \`root\`, and on providers whose images have no \`user\`, it is sbx's own file write.

${FILES_HEAD}
${rows.map(([p, r]) => filesRow(p, r.files)).join('\n')}

Measured on ${new Date().toISOString().slice(0, 10)} with \`node bench/e2b.mjs\`.
`);
