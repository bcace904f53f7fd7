#!/usr/bin/env node
// The CLI from a shell (issue 33, DESIGN.md §11): whole-process wall time of `sbx` commands next to
// a bare `node -e 0` and, on docker, `docker exec` into the very container the sandbox runs in, as
// medians and p90 of interleaved runs (round-robin, so machine noise hits every variant alike) after
// one warm-up each. `sbx exec ID true` runs against a real `sbx serve` child (docker with the test
// image when SBX_BENCH_DOCKER_IMAGE or sbx-test/busybox:latest is there, else mock; temp SQLite,
// temp HOME and an empty SBX_CONFIG). Also lists which heavy modules the light paths load.
// Usage: npm run build && node bench/cli.mjs   (prints a markdown section on stdout; progress on stderr)
// Env: BENCH_RUNS (default 20); BENCH_CLI_BASELINE: another build's bin/sbx.js (its dist/ beside it), whose
// `--version` and `exec ID true` run as extra variants in the same rounds (before/after in one run).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const TARGET_RATIO = 1.1; // sbx --version / node -e 0 (issue 33)
const EXEC_NODE_TARGET = 1.5; // sbx exec ID true / node -e 0
const EXEC_DOCKER_TARGET = 2.0; // sbx exec ID true / docker exec C true
const RUN_TIMEOUT_MS = 30_000;
const SERVER_START_TIMEOUT_MS = 30_000;

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'sbx.js');
const BASELINE = process.env.BENCH_CLI_BASELINE;
const NODE = process.execPath;
const HEAVY = /\/node_modules\/(fastify|better-sqlite3|dockerode|ink|react|pg|pino|undici|eventsource)\//;
const REPORTED = ['fastify', 'better-sqlite3', 'dockerode', 'ink'];

const log = (msg) => process.stderr.write(`bench cli: ${msg}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
};
const fmt = (n) => n.toFixed(1);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## cli\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}

// ------------------------------------------------------------------ an isolated environment

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-cli-'));
const home = join(dir, 'home');
mkdirSync(home);
const emptyConfig = join(dir, 'sbx.yaml');
writeFileSync(emptyConfig, '');
// Only what the runs need: no SBX_* / SVC_* / NODE_OPTIONS from the developer's shell.
const env = { PATH: process.env.PATH ?? '', HOME: home, SBX_CONFIG: emptyConfig, NO_COLOR: '1' };

let server;
let cleanedUp = false;
async function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  if (server && server.exitCode === null && server.signalCode === null) {
    const exited = new Promise((r) => server.once('exit', r));
    server.kill('SIGTERM');
    const t = setTimeout(() => server.kill('SIGKILL'), 5_000);
    await Promise.race([exited, sleep(6_000)]);
    clearTimeout(t);
  }
  rmSync(dir, { recursive: true, force: true });
}
// Bounded: whatever happens, leave.
const watchdog = setTimeout(() => {
  log('watchdog: giving up after 10 minutes');
  try {
    server?.kill('SIGKILL');
  } catch {}
  rmSync(dir, { recursive: true, force: true });
  process.exit(1);
}, 10 * 60_000);
watchdog.unref();

try {
  // ---------------------------------------------------------------- the control plane, as a child
  const image = process.env.SBX_BENCH_DOCKER_IMAGE ?? 'sbx-test/busybox:latest';
  const docker = spawnSync('docker', ['image', 'inspect', image], { stdio: 'ignore', timeout: 10_000 }).status === 0;
  const provider = docker ? { SVC_PROVIDERS_DEFAULT: 'docker', SVC_DEFAULTS_IMAGE: image } : { SVC_PROVIDERS_DEFAULT: 'mock' };
  log(`starting \`sbx serve\` (${docker ? `docker, ${image}` : 'mock provider'}) …`);
  server = spawn(NODE, [BIN, 'serve', '--port', '0', '--host', '127.0.0.1'], {
    cwd: dir,
    env: {
      ...env,
      ...provider,
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'mock'),
      SVC_DATABASE_DRIVER: 'sqlite',
      SVC_DATABASE_PATH: join(dir, 'sbx.db'),
      SVC_LOGGING_LEVEL: 'info',
      SVC_LOGGING_FORMAT: 'json',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let serverOutput = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`sbx serve did not start in ${SERVER_START_TIMEOUT_MS / 1000}s:\n${serverOutput}`)),
      SERVER_START_TIMEOUT_MS,
    );
    const onData = (d) => {
      serverOutput += d.toString();
      const m = /listening on (http:\/\/[^\s"]+)/.exec(serverOutput);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    server.stdout.on('data', onData);
    server.stderr.on('data', onData);
    server.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`sbx serve exited (${code ?? signal}) before listening:\n${serverOutput}`));
    });
  });
  // Keep draining its output so the pipe never fills up.
  server.stdout.resume();
  server.stderr.resume();
  log(`server at ${url}`);

  const res = await fetch(`${url}/api/v1/sandboxes`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{}',
    signal: AbortSignal.timeout(30_000),
  });
  const body = await res.text();
  if (!res.ok) throw new Error(`POST /api/v1/sandboxes: ${res.status} ${body}`);
  const id = JSON.parse(body).id;
  log(`sandbox ${id}`);
  const container = docker
    ? spawnSync('docker', ['ps', '-q', '--filter', `label=sbx.sandbox_id=${id}`], { encoding: 'utf8', timeout: 10_000 }).stdout.trim()
    : '';

  // ---------------------------------------------------------------- the variants
  const variants = [
    { label: '`node -e 0`', args: ['-e', '0'], code: 0 },
    { label: '`sbx --version`', args: [BIN, '--version'], code: 0 },
    { label: '`sbx exec --help`', args: [BIN, 'exec', '--help'], code: 0 },
    { label: '`sbx ls`', args: [BIN, '--url', url, 'ls'], code: 0 },
    { label: '`sbx exec ID true`', args: [BIN, '--url', url, 'exec', id, 'true'], code: 0 },
    ...(container
      ? [{ label: '`docker exec C true` (the same container)', cmd: 'docker', args: ['exec', container, 'true'], code: 0 }]
      : []),
    ...(BASELINE
      ? [
          { label: '`sbx --version`, before (BENCH_CLI_BASELINE)', args: [BASELINE, '--version'], code: 0 },
          { label: '`sbx exec ID true`, before (BENCH_CLI_BASELINE)', args: [BASELINE, '--url', url, 'exec', id, 'true'], code: 0 },
        ]
      : []),
  ];

  /** One whole-process run; returns wall time in ms. spawnSync blocks, which is fine: the server is a separate process. */
  function runOnce(v) {
    const t0 = process.hrtime.bigint();
    const r = spawnSync(v.cmd ?? NODE, v.args, { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: RUN_TIMEOUT_MS });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r.error || r.status !== v.code) {
      throw new Error(
        `${v.label}: exit ${r.status ?? r.signal ?? r.error?.message}\n${r.stdout?.toString() ?? ''}${r.stderr?.toString() ?? ''}`,
      );
    }
    return ms;
  }

  log('warm-up …');
  for (const v of variants) runOnce(v);
  const times = variants.map(() => []);
  for (let i = 0; i < RUNS; i++) {
    variants.forEach((v, j) => times[j].push(runOnce(v)));
    if ((i + 1) % 5 === 0) log(`${i + 1}/${RUNS} rounds`);
  }

  // ---------------------------------------------------------------- heavy modules on the light paths
  // A module.register resolve hook logs every ESM resolution (as in test/e2e/cli-bin.test.ts);
  // the CommonJS cache at exit catches packages that other CommonJS code require()s.
  const hooks = join(dir, 'hooks.mjs');
  const register = join(dir, 'register.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(process.env.BENCH_MODULE_LOG, r.url + '\\n');
  return r;
}
`,
  );
  writeFileSync(
    register,
    `import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
register(${JSON.stringify(pathToFileURL(hooks).href)});
const cache = createRequire(import.meta.url).cache;
process.on('exit', () =>
  appendFileSync(process.env.BENCH_MODULE_LOG, Object.keys(cache).map((f) => pathToFileURL(f).href + '\\n').join('')),
);
`,
  );
  const loads = [];
  // --version, exec --help and exec ID true (the exec fast path: one CommonJS bundle, issue 33).
  for (const v of [variants[1], variants[2], variants[4]]) {
    const logFile = join(dir, `modules-${loads.length}.log`);
    writeFileSync(logFile, '');
    const r = spawnSync(NODE, ['--import', pathToFileURL(register).href, ...v.args], {
      cwd: dir,
      env: { ...env, BENCH_MODULE_LOG: logFile },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: RUN_TIMEOUT_MS,
    });
    if (r.status !== 0) throw new Error(`${v.label} with the module hook: exit ${r.status ?? r.signal}\n${r.stderr}`);
    const urls = [...new Set(readFileSync(logFile, 'utf8').split('\n').filter(Boolean))];
    const heavy = [...new Set(urls.map((u) => HEAVY.exec(u)?.[1]).filter(Boolean))].sort();
    const deps = new Set(urls.map((u) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(u)?.[1]).filter(Boolean));
    const own = urls.filter((u) => u.startsWith(pathToFileURL(join(ROOT, 'dist')).href)).length;
    loads.push({ label: v.label, heavy, deps: [...deps].sort(), own });
  }

  // ---------------------------------------------------------------- report
  const base = median(times[0]);
  const rows = variants.map((v, j) => {
    const med = median(times[j]);
    return `| ${v.label} | ${fmt(med)} | ${fmt(pct(times[j], 90))} | ${(med / base).toFixed(2)}× |`;
  });
  const versionRatio = median(times[1]) / base;
  const verdict = (ratio, target) => `${ratio.toFixed(2)}×, ${ratio <= target ? 'met' : 'NOT met'}`;
  const execMed = median(times[4]);
  const targets = [
    `\`sbx --version\` ≤ ${TARGET_RATIO} × \`node -e 0\`: ${verdict(versionRatio, TARGET_RATIO)}`,
    `\`sbx exec ID true\` ≤ ${EXEC_NODE_TARGET} × \`node -e 0\`: ${verdict(execMed / base, EXEC_NODE_TARGET)}`,
    ...(container
      ? [`\`sbx exec ID true\` ≤ ${EXEC_DOCKER_TARGET} × \`docker exec\`: ${verdict(execMed / median(times[5]), EXEC_DOCKER_TARGET)}`]
      : []),
  ];
  const loadRows = loads.map((l) => {
    const flags = REPORTED.map((m) => (l.heavy.includes(m) ? 'loaded' : 'no')).join(' | ');
    const other = l.heavy.filter((m) => !REPORTED.includes(m));
    return (
      `| ${l.label} | ${flags} | ${other.length ? other.join(', ') : 'none'} | ${l.own} | ` +
      `${l.deps.length ? l.deps.join(', ') : 'none'} |`
    );
  });

  console.log(`## cli

Whole-process wall time of the CLI next to a bare Node start${container ? ' and `docker exec` into the same container' : ''}:
medians and p90 of ${RUNS} interleaved runs each (round-robin, after one warm-up each),
\`spawnSync\` timed with \`process.hrtime.bigint()\`. \`sbx\` talks to a real
\`sbx serve\` child on ${docker ? 'docker' : 'the mock provider'}. Empty HOME and SBX_CONFIG.

| command | median ms | p90 ms | ratio to \`node -e 0\` |
|---|---|---|---|
${rows.join('\n')}

Targets: ${targets.join('; ')}.

Modules loaded on the light paths (ESM resolutions and the CommonJS cache):

| command | fastify | better-sqlite3 | dockerode | ink | other heavy (react, pg, pino, undici, eventsource) | dist modules | packages |
|---|---|---|---|---|---|---|---|
${loadRows.join('\n')}
`);
  // A missed target or a heavy load is reported in the table, not as a failure: run.mjs would drop the section.
  process.exitCode = 0;
} catch (err) {
  log(`failed: ${err && err.stack ? err.stack : String(err)}`);
  process.exitCode = 1;
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
