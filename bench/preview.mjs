#!/usr/bin/env node
// Live preview proxy vs the same server fetched directly: a real `sbx serve` (mock provider), an
// HTTP server (busybox httpd) started inside a sandbox, and the same client code for both paths,
// iterations interleaved so machine noise hits both alike.
// Usage: npm run build && node bench/preview.mjs   (markdown on stdout; progress on stderr)
// Env: BENCH_RUNS (small GETs per path, default 400), BENCH_FILE_RUNS (10 MiB GETs, default 15).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { freePort } from './lib/net.mjs';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'bin', 'sbx.js');
const RUNS = Number(process.env.BENCH_RUNS ?? 400);
const FILE_RUNS = Number(process.env.BENCH_FILE_RUNS ?? 15);
const BIG = randomBytes(10 * 1024 * 1024);
const DOMAIN = 'preview.localhost';
const log = (m) => process.stderr.write(`bench preview: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## preview\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-preview-'));
let serve;
process.on('exit', () => {
  if (serve && serve.exitCode === null) serve.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
/** One GET with an explicit Host; resolves with the byte count. */
function get(port, host, path) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host }, setHost: false, agent }, (res) => {
      let n = 0;
      res.on('data', (c) => (n += c.length));
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}

const apiPort = await freePort();
const env = {
  ...process.env,
  HOME: dir,
  SVC_SERVER_PORT: String(apiPort),
  SVC_PROVIDERS_DEFAULT: 'mock',
  SVC_PROVIDERS_MOCK_ROOT_DIR: join(dir, 'mock'),
  SVC_DATABASE_PATH: join(dir, 'sbx.db'),
  SVC_SERVER_PREVIEW_DOMAIN: DOMAIN,
  SVC_LOGGING_LEVEL: 'warn',
};
serve = spawn(process.execPath, [BIN, 'serve'], { env, cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
const api = `http://127.0.0.1:${apiPort}`;
for (let i = 0; ; i++) {
  if ((await fetch(`${api}/api/v1/live`).catch(() => null))?.ok) break;
  if (i > 100) throw new Error('sbx serve did not start');
  await new Promise((r) => setTimeout(r, 100));
}
const box = await (
  await fetch(`${api}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
).json();
await fetch(`${api}/api/v1/sandboxes/${box.id}/files`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({
    path: '/workspace/www/index.html',
    content: '<h1>hello from a sandbox, about a hundred bytes of html to fetch over and over</h1>\n',
  }),
});
await fetch(`${api}/api/v1/sandboxes/${box.id}/files?path=/workspace/www/big.bin`, {
  method: 'POST',
  headers: { 'content-type': 'application/octet-stream' },
  body: BIG,
});
const port = await freePort();
const stop = new AbortController();
fetch(`${api}/api/v1/sandboxes/${box.id}/exec`, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ command: `exec busybox httpd -f -p 127.0.0.1:${port} -h .`, workdir: '/workspace/www', stream: true }),
  signal: stop.signal,
}).catch(() => undefined);

const direct = { port, host: `127.0.0.1:${port}` };
// The ceiling of any proxy written in Node here: a bare TCP relay (no HTTP at all) in a process of
// its own, in front of the same server.
const relayPort = await freePort();
const relay = spawn(
  process.execPath,
  [
    '-e',
    `require('net').createServer((c) => { const u = require('net').connect(${port}, '127.0.0.1'); c.pipe(u); ` +
      `u.pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); }).listen(${relayPort}, '127.0.0.1')`,
  ],
  { stdio: 'ignore' },
);
process.on('exit', () => relay.kill('SIGKILL'));
const relayed = { port: relayPort, host: `127.0.0.1:${port}` };
const proxied = { port: apiPort, host: `${port}-${box.id}.${DOMAIN}:${apiPort}` };
for (let i = 0; ; i++) {
  if (await get(proxied.port, proxied.host, '/index.html').catch(() => 0)) break;
  if (i > 100) throw new Error('the sandbox httpd did not answer');
  await new Promise((r) => setTimeout(r, 100));
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((xs.length * p) / 100))];
const median = (xs) => pct(xs, 50);
const time = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};

log(`small GETs x${RUNS} each`);
const small = { direct: [], proxied: [] };
for (let i = 0; i < 50; i++) await get(proxied.port, proxied.host, '/index.html'), await get(direct.port, direct.host, '/index.html');
for (let i = 0; i < RUNS; i++) {
  small.direct.push(await time(() => get(direct.port, direct.host, '/index.html')));
  small.proxied.push(await time(() => get(proxied.port, proxied.host, '/index.html')));
}
log(`10 MiB GETs x${FILE_RUNS} each`);
const big = { direct: [], proxied: [], relayed: [] };
const mibps = (ms) => 10 / (ms / 1000);
for (let i = 0; i < 100 && !(await get(relayed.port, relayed.host, '/index.html').catch(() => 0)); i++)
  await new Promise((r) => setTimeout(r, 100));
for (let i = 0; i < FILE_RUNS; i++) {
  big.direct.push(mibps(await time(() => get(direct.port, direct.host, '/big.bin'))));
  big.proxied.push(mibps(await time(() => get(proxied.port, proxied.host, '/big.bin'))));
  big.relayed.push(mibps(await time(() => get(relayed.port, relayed.host, '/big.bin'))));
}
log('16 concurrent small GETs for 2 s each');
async function rate(t) {
  let n = 0;
  const end = performance.now() + 2000;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < end) {
        await get(t.port, t.host, '/index.html');
        n++;
      }
    }),
  );
  return n / 2;
}
const rates = { direct: await rate(direct), proxied: await rate(proxied) };

stop.abort();
const f = (x, d = 2) => x.toFixed(d);
const addedP50 = median(small.proxied) - median(small.direct);
const tput = median(big.proxied) / median(big.direct);
/** A markdown table row (one line: a row cannot wrap). */
const tableRow = (cells) => `| ${cells.join(' | ')} |`;
const smallP50 = [
  `small GET p50 (ms, n=${RUNS})`,
  f(median(small.direct), 3),
  f(median(small.proxied), 3),
  `${f(median(small.proxied) / median(small.direct))} (added ${f(addedP50, 3)} ms)`,
];
const smallP99 = [
  'small GET p99 (ms)',
  f(pct(small.direct, 99), 3),
  f(pct(small.proxied, 99), 3),
  f(pct(small.proxied, 99) / pct(small.direct, 99)),
];
console.log(`## preview

The live-preview proxy of \`sbx serve\` (mock provider, \`server.preview_domain\`) against fetching the
same busybox httpd inside the sandbox directly, from the same client (node:http, keep-alive to the
proxy; the proxy opens a fresh connection to the sandbox per request), iterations interleaved in one
run. ${cpus().length} CPUs, Node ${process.version}. Targets (issue 13): throughput ratio ≥ 0.8, added p50 ≤ 1 ms.

| measure | direct | through the proxy | proxy / direct |
|---|---|---|---|
${tableRow(smallP50)}
${tableRow(smallP99)}
| 10 MiB GET (MiB/s median, n=${FILE_RUNS}) | ${f(median(big.direct), 0)} | ${f(median(big.proxied), 0)} | ${f(tput)} |
| 16 concurrent small GETs (req/s) | ${f(rates.direct, 0)} | ${f(rates.proxied, 0)} | ${f(rates.proxied / rates.direct)} |

The ceiling on this machine: a bare Node TCP relay (no HTTP, its own process) in front of the same
server moves the 10 MiB GET at ${f(median(big.relayed), 0)} MiB/s, ${f(median(big.relayed) / median(big.direct))} of direct, in the
same run: every byte through one more process costs about as much CPU as the client's own reading,
and there are ${cpus().length} CPUs
for the client, the relay and the server.
`);
agent.destroy();
process.exit(0);
