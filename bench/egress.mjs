#!/usr/bin/env node
// The egress gateway's relay (DESIGN.md §10, §11 target: 10 MiB over http through the gateway ≤ 1.5 ×
// a bridge sandbox's direct fetch), side by side in one run: the real EgressGateway (dist/) on
// loopback in this process, an upstream http and https server in a child process, and the host's
// curl fetching 10 MiB directly vs through the gateway (absolute-form http, and a CONNECT tunnel with
// the SNI check). No docker or namespaces: what differs between the rows is only the gateway's
// relay. test/docker/egress.test.ts measures the same through a filtered docker sandbox.
// Usage: npm run build && node bench/egress.mjs   (markdown on stdout)
// Env: EGRESS_RUNS (fetches per row, default 15), EGRESS_DIST (another build's dist/ instead of this one),
// EGRESS_BASELINE (another build's dist/ run beside this one, interleaved: its rows are marked "before").
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from './lib/net.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = process.env.EGRESS_DIST ?? join(ROOT, 'dist');
const RUNS = Number(process.env.EGRESS_RUNS ?? 15);
const SIZE = 10 * 1024 * 1024;

const missing = ['curl', 'openssl'].find((c) => {
  try {
    execFileSync('which', [c], { stdio: 'ignore' });
    return false;
  } catch {
    return true;
  }
});
if (!existsSync(join(DIST, 'transports', 'egress', 'gateway.js')) || missing) {
  console.log(`## egress\n\nSkipped: ${missing ? `${missing} missing` : 'dist/ missing (run `npm run build`)'}.\n`);
  process.exit(0);
}
const { EgressGateway } = await import(join(DIST, 'transports', 'egress', 'gateway.js'));
const BASELINE = process.env.EGRESS_BASELINE;
const Baseline = BASELINE ? (await import(join(BASELINE, 'transports', 'egress', 'gateway.js'))).EgressGateway : null;

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-egress-'));
execFileSync(
  'openssl',
  [
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-keyout',
    'key.pem',
    '-out',
    'cert.pem',
    '-days',
    '1',
    '-subj',
    '/CN=up.test',
    '-addext',
    'subjectAltName=DNS:up.test',
  ],
  { cwd: dir, stdio: 'ignore' },
);
const [httpPort, httpsPort, gwPort, basePort] = [await freePort(), await freePort(), await freePort(), await freePort()];
const UPSTREAM = `
const http = require('node:http'), https = require('node:https'), fs = require('node:fs');
const big = Buffer.alloc(${SIZE}, 120);
const body = (req, res) => res.end(req.url === '/big' ? big : 'ok');
http.createServer(body).listen(${httpPort}, '127.0.0.1', () =>
  https
    .createServer({ key: fs.readFileSync('key.pem'), cert: fs.readFileSync('cert.pem') }, body)
    .listen(${httpsPort}, '127.0.0.1', () => process.stdout.write('ready\\n')));
`;
const upstream = spawn(process.execPath, ['-e', UPSTREAM], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
await new Promise((r) => upstream.stdout.once('data', r));

const gatewayOptions = (port) => ({
  host: '127.0.0.1',
  port,
  sandboxFor: async () => 'sb-bench',
  rules: async () => ({ allow: ['up.test', '127.0.0.1'], deny: [] }),
  resolve: async (name) => (name === 'up.test' ? ['127.0.0.1'] : []),
});
const gateway = new EgressGateway(gatewayOptions(gwPort));
await gateway.start();
const baseline = Baseline ? new Baseline(gatewayOptions(basePort)) : null;
await baseline?.start();

/** curl's own total time (ms) for one 10 MiB fetch; the child runs beside this process's gateway. */
function fetchMs(args) {
  return new Promise((resolve, reject) => {
    const c = spawn('curl', ['-sS', '--max-time', '30', '-o', '/dev/null', '-w', '%{time_total} %{size_download}', ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    c.stdout.on('data', (d) => (out += d));
    c.once('exit', (code) => {
      const [t, n] = out.trim().split(' ');
      if (code !== 0 || Number(n) !== SIZE) return reject(new Error(`curl ${args.join(' ')}: exit ${code}, ${n} bytes`));
      resolve(Number(t) * 1000);
    });
  });
}

const cacert = ['--cacert', join(dir, 'cert.pem')];
const rows = {
  direct: [`http://127.0.0.1:${httpPort}/big`],
  gateway: ['-x', `http://127.0.0.1:${gwPort}`, `http://up.test:${httpPort}/big`],
  directTls: [...cacert, '--resolve', `up.test:${httpsPort}:127.0.0.1`, `https://up.test:${httpsPort}/big`],
  tunnel: ['-x', `http://127.0.0.1:${gwPort}`, ...cacert, `https://up.test:${httpsPort}/big`],
  ...(baseline
    ? {
        gatewayBase: ['-x', `http://127.0.0.1:${basePort}`, `http://up.test:${httpPort}/big`],
        tunnelBase: ['-x', `http://127.0.0.1:${basePort}`, ...cacert, `https://up.test:${httpsPort}/big`],
      }
    : {}),
};
const times = Object.fromEntries(Object.keys(rows).map((k) => [k, []]));
// CPU of this process (the gateway, and spawning curl) per fetch of each row.
const cpu = Object.fromEntries(Object.keys(rows).map((k) => [k, 0]));
try {
  // Interleaved, after one warm-up each, so load on the machine falls on every row alike.
  for (const args of Object.values(rows)) await fetchMs(args);
  for (let i = 0; i < RUNS; i++)
    for (const [k, args] of Object.entries(rows)) {
      const c0 = process.cpuUsage();
      times[k].push(await fetchMs(args));
      const c = process.cpuUsage(c0);
      cpu[k] += (c.user + c.system) / 1000 / RUNS;
    }
} finally {
  await gateway.close();
  await baseline?.close();
  upstream.kill();
  rmSync(dir, { recursive: true, force: true });
}
const med = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const m = Object.fromEntries(Object.entries(times).map(([k, xs]) => [k, med(xs)]));
const row = (label, direct, via, directCpu) =>
  `| ${label} | ${m[direct].toFixed(1)} ms | ${m[via].toFixed(1)} ms | ${(m[via] / m[direct]).toFixed(2)}× | ` +
  `${(cpu[via] - cpu[directCpu]).toFixed(1)} |`;
const lines = [
  ...(baseline ? [row('http, before (EGRESS_BASELINE)', 'direct', 'gatewayBase', 'direct')] : []),
  row(baseline ? 'http, after' : 'http', 'direct', 'gateway', 'direct'),
  ...(baseline ? [row('https (CONNECT tunnel), before', 'directTls', 'tunnelBase', 'directTls')] : []),
  row(baseline ? 'https (CONNECT tunnel), after' : 'https (CONNECT tunnel)', 'directTls', 'tunnel', 'directTls'),
];
console.log(`## egress

10 MiB fetched with the host's curl from an upstream on loopback: directly vs through the egress gateway
(\`bench/egress.mjs\`: the real \`EgressGateway\` of dist/ in the bench's process; absolute-form http, and
a CONNECT tunnel with the SNI check for https). Median of ${RUNS} interleaved runs. Target (DESIGN §11):
http through the gateway ≤ 1.5 × the direct fetch. Gateway CPU = the gateway process's CPU time per
fetch beyond what the direct row costs it (spawning curl): the relay's own work, which load on the
machine does not inflate.

| transfer (10 MiB) | direct | through the gateway | gateway / direct | gateway CPU ms |
| --- | --- | --- | --- | --- |
${lines.join('\n')}
`);
process.exit(0);
