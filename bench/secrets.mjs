#!/usr/bin/env node
// Secrets injection at the egress gateway (DESIGN.md §15): the same HTTPS requests through an
// intercepted tunnel (TLS terminated with the node CA's leaf, Authorization placeholder replaced,
// a second TLS connection to the upstream) vs through a plain CONNECT tunnel of the same gateway
// (bytes relayed, TLS end to end). Gateway (from dist/), upstream (node:https, loopback) and
// client share this process and its two cores; iterations are interleaved.
// Usage: npm run build && node bench/secrets.mjs   (markdown on stdout; progress on stderr)
// Env: BENCH_FILE_RUNS (10 MiB transfers per path and direction, default 7), BENCH_SMALL (small requests per path, default 1000).
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const FILE_RUNS = Number(process.env.BENCH_FILE_RUNS ?? 7);
const SMALL = Number(process.env.BENCH_SMALL ?? 1000);
const MIB10 = 10 * 1024 * 1024;
const log = (m) => process.stderr.write(`bench secrets: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'transports', 'egress', 'intercept.js'))) {
  console.log('## secrets\n\nSkipped: dist/ is missing or stale (run `npm run build`).\n');
  process.exit(0);
}
const { NodeCa } = await import(join(ROOT, 'dist', 'adapters', 'system', 'tls-ca.js'));
const { EgressGateway } = await import(join(ROOT, 'dist', 'transports', 'egress', 'gateway.js'));
const { parseRule } = await import(join(ROOT, 'dist', 'core', 'network', 'index.js'));

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-secrets-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const upCa = await NodeCa.open(join(dir, 'upstream-ca'), 'bench upstream CA');
const nodeCa = await NodeCa.open(join(dir, 'node-ca'));
const leaves = {
  'api.test': await upCa.leaf({ kind: 'name', name: 'api.test' }),
  'plain.test': await upCa.leaf({ kind: 'name', name: 'plain.test' }),
};
const contexts = Object.fromEntries(
  Object.entries(leaves).map(([n, l]) => [n, tls.createSecureContext({ key: l.keyPem, cert: l.certPem })]),
);
const chunk = Buffer.alloc(64 * 1024, 120);
const upstream = https.createServer(
  { SNICallback: (n, cb) => cb(null, contexts[n]), key: leaves['api.test'].keyPem, cert: leaves['api.test'].certPem },
  (req, res) => {
    if (req.url === '/big') {
      let sent = 0;
      res.setHeader('content-length', String(MIB10));
      const pump = () => {
        while (sent < MIB10) {
          sent += chunk.length;
          if (!res.write(chunk)) return res.once('drain', pump);
        }
        res.end();
      };
      return pump();
    }
    let n = 0;
    req.on('data', (d) => (n += d.length));
    req.on('end', () => res.end(req.url === '/small' ? `ok ${req.headers.authorization?.length ?? 0}` : String(n)));
  },
);
upstream.keepAliveTimeout = 60_000;
await new Promise((r) => upstream.listen(0, '127.0.0.1', r));
const upPort = upstream.address().port;

const PH = `sbx_secret_${'a'.repeat(32)}`;
let injected = 0;
const gw = new EgressGateway({
  host: '127.0.0.1',
  port: 0,
  sandboxFor: async () => 'sb-bench',
  // 127.0.0.0/8 opens loopback for the bench (a CIDR inside the special range).
  rules: async () => ({ allow: ['api.test', 'plain.test', '127.0.0.0/8'], deny: [] }),
  resolve: async () => ['127.0.0.1'],
  secrets: {
    forSandbox: async () => [
      { name: 'API_TOKEN', placeholder: PH, value: 'tok-bench-value', hosts: [parseRule('api.test')], allowPlainHttp: false },
    ],
  },
  interception: { leaf: (h) => nodeCa.leaf(h), upstream: tls.createSecureContext({ ca: upCa.certPem }) },
  onInjection: () => void injected++,
});
await gw.start();

/** A tunnel to host through the gateway, TLS to the client trusting `ca`; HTTP/1.1 over it with keep-alive. */
async function tunnel(host, ca) {
  const req = http.request({ host: '127.0.0.1', port: gw.port, method: 'CONNECT', path: `${host}:${upPort}` });
  req.end();
  const [res, sock] = await once(req, 'connect');
  if (res.statusCode !== 200) throw new Error(`CONNECT ${res.statusCode}`);
  const t = tls.connect({ socket: sock, servername: host, ca, ALPNProtocols: ['http/1.1'] });
  await once(t, 'secureConnect');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  agent.createConnection = () => t;
  return { agent, close: () => (agent.destroy(), t.destroy()) };
}

function send(agent, host, method, path, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ agent, host, port: upPort, method, path, headers: { authorization: `Bearer ${PH}` } }, (res) => {
      let n = 0;
      res.on('data', (d) => (n += d.length));
      res.on('end', () => (res.statusCode === 200 ? resolve(n) : reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
    if (!body) return req.end();
    let sent = 0;
    const pump = () => {
      while (sent < body) {
        sent += chunk.length;
        if (!req.write(chunk)) return req.once('drain', pump);
      }
      req.end();
    };
    pump();
  });
}

const PATHS = { intercepted: ['api.test', nodeCa.certPem], tunnel: ['plain.test', upCa.certPem] };
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const ms = (x) => `${x.toFixed(1)} ms`;

async function timed(fn) {
  const t0 = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const rows = [];
for (const [label, method, path, body] of [
  ['10 MiB download (new tunnel each)', 'GET', '/big', 0],
  ['10 MiB upload (new tunnel each)', 'POST', '/up', MIB10],
]) {
  const times = { intercepted: [], tunnel: [] };
  for (let i = 0; i < FILE_RUNS; i++) {
    for (const which of ['tunnel', 'intercepted']) {
      const [host, ca] = PATHS[which];
      times[which].push(
        await timed(async () => {
          const t = await tunnel(host, ca);
          await send(t.agent, host, method, path, body);
          t.close();
        }),
      );
    }
  }
  log(`${label} done`);
  rows.push([label, median(times.tunnel), median(times.intercepted)]);
}
{
  const totals = {};
  for (const which of ['tunnel', 'intercepted']) {
    const [host, ca] = PATHS[which];
    const t = await tunnel(host, ca);
    await send(t.agent, host, 'GET', '/small');
    totals[which] = await timed(async () => {
      for (let i = 0; i < SMALL; i++) await send(t.agent, host, 'GET', '/small');
    });
    t.close();
  }
  log('small requests done');
  rows.push([`${SMALL} small GETs, one keep-alive tunnel (total)`, totals.tunnel, totals.intercepted]);
}
await gw.close();
upstream.close();

console.log(`## secrets

HTTPS through the egress gateway with a secret injected (the tunnel intercepted: TLS terminated
with a leaf of the node's CA, the Authorization placeholder replaced, a TLS connection of the
gateway's own to the upstream) vs the same requests through a plain CONNECT tunnel of the same
gateway (TLS end to end, bytes relayed). Gateway, upstream (node:https) and client in one Node
process on loopback, 2 shared cores; \`node bench/secrets.mjs\`. Medians of ${FILE_RUNS} for the
10 MiB rows; ${injected} injections counted.

| request | plain tunnel | intercepted | intercepted / tunnel |
| --- | --- | --- | --- |
${rows.map(([l, a, b]) => `| ${l} | ${ms(a)} | ${ms(b)} | ${(b / a).toFixed(2)}× |`).join('\n')}
`);
process.exit(0);
