#!/usr/bin/env node
// Secrets injection at the egress gateway (DESIGN.md §15): the same HTTPS requests through an
// intercepted tunnel (TLS terminated with the node CA's leaf, Authorization placeholder replaced,
// a second TLS connection to the upstream) vs through a plain CONNECT tunnel of the same gateway
// (bytes relayed, TLS end to end). The gateway (from dist/), the client (the sandbox's side) and the
// upstream (node:https, loopback) share this process; BENCH_GATEWAY=process runs the gateway in a
// process of its own, as in `sbx serve`. Iterations are interleaved; with BENCH_BEFORE_DIST (another build's dist/) a second gateway
// from that build runs beside it, interleaved too, so before and after come from one run.
// Usage: npm run build && node bench/secrets.mjs   (markdown on stdout; progress on stderr)
// Env: BENCH_FILE_RUNS (10 MiB transfers per path and direction, default 7), BENCH_SMALL (small
// requests per path, default 1000), BENCH_BEFORE_DIST (optional), BENCH_PROFILE_DIR (CPU profiles of the gateways).
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const PH = `sbx_secret_${'a'.repeat(32)}`;

if (process.argv[2] === '--gateway') await gatewayChild(process.argv[3], process.argv[4]);
else await main();

/** The gateway process: a gateway from `dist`, its CA in `dir`; answers `stats` with its CPU time and injections. */
async function gatewayChild(dist, dir) {
  const g = await startGateway(dist, dir);
  process.on('message', (m) => {
    if (m === 'stats') process.send(g.stats());
    if (m === 'exit') void g.close().then(() => process.exit(0));
  });
  process.send({ port: g.port });
}

/** A gateway from `dist` with its CA in `dir`, as compose sets one up for secrets. */
async function startGateway(dist, dir) {
  const { NodeCa } = await import(join(dist, 'adapters', 'system', 'tls-ca.js'));
  const { EgressGateway } = await import(join(dist, 'transports', 'egress', 'gateway.js'));
  const { parseRule } = await import(join(dist, 'core', 'network', 'index.js'));
  // The upstream trust as compose makes it (with the gateway's cipher order where the build has one).
  const { GATEWAY_CIPHERS } = await import(join(dist, 'transports', 'egress', 'intercept.js'));
  const upCa = await NodeCa.open(join(dir, 'upstream-ca'), 'bench upstream CA');
  const nodeCa = await NodeCa.open(join(dir, 'node-ca'));
  let injected = 0;
  const bound = Promise.resolve([
    { name: 'API_TOKEN', placeholder: PH, value: 'tok-bench-value', hosts: [parseRule('api.test')], allowPlainHttp: false },
  ]);
  const gw = new EgressGateway({
    host: '127.0.0.1',
    port: 0,
    sandboxFor: async () => 'sb-bench',
    // 127.0.0.0/8 opens loopback for the bench (a CIDR inside the special range).
    rules: async () => ({ allow: ['api.test', 'plain.test', '127.0.0.0/8'], deny: [] }),
    resolve: async () => ['127.0.0.1'],
    // One answer kept, as the control plane's source keeps it (≤ 1 s).
    secrets: { forSandbox: () => bound },
    interception: {
      leaf: (h) => nodeCa.leaf(h),
      upstream: tls.createSecureContext({ ca: upCa.certPem, ...(GATEWAY_CIPHERS ? { ciphers: GATEWAY_CIPHERS } : {}) }),
    },
    onInjection: () => void injected++,
  });
  await gw.start();
  return { port: gw.port, stats: () => ({ cpu: process.cpuUsage(), injected }), close: () => gw.close() };
}

async function main() {
  const FILE_RUNS = Number(process.env.BENCH_FILE_RUNS ?? 7);
  const SMALL = Number(process.env.BENCH_SMALL ?? 1000);
  const MIB10 = 10 * 1024 * 1024;
  const IN_PROCESS = process.env.BENCH_GATEWAY !== 'process';
  const log = (m) => process.stderr.write(`bench secrets: ${m}\n`);
  const dists = [['after', join(ROOT, 'dist')]];
  if (process.env.BENCH_BEFORE_DIST) dists.unshift(['before', process.env.BENCH_BEFORE_DIST]);
  for (const [, d] of dists) {
    if (!existsSync(join(d, 'transports', 'egress', 'intercept.js'))) {
      console.log(`## secrets\n\nSkipped: ${d} is missing or stale (run \`npm run build\`).\n`);
      process.exit(0);
    }
  }
  const { NodeCa } = await import(join(ROOT, 'dist', 'adapters', 'system', 'tls-ca.js'));
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

  const gateways = [];
  for (const [label, d] of dists) {
    if (IN_PROCESS) {
      const g = await startGateway(d, dir);
      gateways.push({ label, port: g.port, stats: async () => g.stats(), exit: () => g.close() });
      continue;
    }
    const child = fork(fileURLToPath(import.meta.url), ['--gateway', d, dir], {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      execArgv: process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [],
    });
    const [{ port }] = await once(child, 'message');
    const stats = async () => {
      child.send('stats');
      return (await once(child, 'message'))[0];
    };
    gateways.push({ label, port, stats, exit: () => child.send('exit') });
  }
  const stats = (g) => g.stats();

  /** A tunnel to host through a gateway, TLS to the client trusting `ca`; HTTP/1.1 over it with keep-alive. */
  async function tunnel(gwPort, host, ca) {
    const req = http.request({ host: '127.0.0.1', port: gwPort, method: 'CONNECT', path: `${host}:${upPort}` });
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

  const PATHS = { tunnel: ['plain.test', upCa.certPem], intercepted: ['api.test', nodeCa.certPem] };
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const cpuMs = (a, b) => (b.user + b.system - a.user - a.system) / 1000;

  async function timed(fn) {
    const t0 = process.hrtime.bigint();
    await fn();
    return Number(process.hrtime.bigint() - t0) / 1e6;
  }
  /** Runs `one(gateway, path)` interleaved; per gateway and path: median wall time, and the gateway's CPU per run. */
  async function measure(runs, one) {
    const out = gateways.map(() => ({ tunnel: { t: [], cpu: 0 }, intercepted: { t: [], cpu: 0 } }));
    for (let i = 0; i < runs; i++) {
      for (const [gi, g] of gateways.entries()) {
        for (const which of ['tunnel', 'intercepted']) {
          const before = (await stats(g)).cpu;
          out[gi][which].t.push(await timed(() => one(g, which)));
          out[gi][which].cpu += cpuMs(before, (await stats(g)).cpu) / runs;
        }
      }
    }
    return out.map((o) => ({
      tunnel: { ms: median(o.tunnel.t), cpu: o.tunnel.cpu },
      intercepted: { ms: median(o.intercepted.t), cpu: o.intercepted.cpu },
    }));
  }

  const rows = [];
  for (const [label, method, path, body] of [
    ['10 MiB download (new tunnel each)', 'GET', '/big', 0],
    ['10 MiB upload (new tunnel each)', 'POST', '/up', MIB10],
  ]) {
    rows.push([
      label,
      await measure(FILE_RUNS, async (g, which) => {
        const [host, ca] = PATHS[which];
        const t = await tunnel(g.port, host, ca);
        await send(t.agent, host, method, path, body);
        t.close();
      }),
    ]);
    log(`${label} done`);
  }
  {
    const open = new Map();
    for (const g of gateways)
      for (const which of ['tunnel', 'intercepted']) {
        const [host, ca] = PATHS[which];
        const t = await tunnel(g.port, host, ca);
        await send(t.agent, host, 'GET', '/small');
        open.set(`${g.label} ${which}`, t);
      }
    // In 5 interleaved rounds (a busy machine's drift hits both paths alike): the median round × ROUNDS.
    const ROUNDS = 5;
    const per = Math.ceil(SMALL / ROUNDS);
    const r = await measure(ROUNDS, async (g, which) => {
      const t = open.get(`${g.label} ${which}`);
      for (let i = 0; i < per; i++) await send(t.agent, PATHS[which][0], 'GET', '/small');
    });
    for (const x of r) for (const p of [x.tunnel, x.intercepted]) (p.ms *= ROUNDS), (p.cpu *= ROUNDS);
    rows.push([`${per * ROUNDS} small GETs, one keep-alive tunnel (total)`, r]);
    for (const t of open.values()) t.close();
    log('small requests done');
  }
  const injected = [];
  for (const g of gateways) {
    injected.push(`${g.label}: ${(await stats(g)).injected}`);
    await g.exit();
  }
  upstream.close();

  const ms = (x) => `${x.toFixed(1)} ms`;
  const cpuOf = IN_PROCESS ? "the one process's (client, upstream and gateway)" : "the gateway process's";
  const head = gateways.map(
    (g) =>
      `${g.label}: tunnel | ${g.label}: intercepted | ${g.label}: ratio | ${g.label}: CPU, tunnel → intercepted | ${g.label}: CPU ratio`,
  );
  const cells = (r) =>
    r
      .map(
        (x) =>
          `${ms(x.tunnel.ms)} | ${ms(x.intercepted.ms)} | **${(x.intercepted.ms / x.tunnel.ms).toFixed(2)}×** | ` +
          `${ms(x.tunnel.cpu)} → ${ms(x.intercepted.cpu)} | **${(x.intercepted.cpu / x.tunnel.cpu).toFixed(2)}×**`,
      )
      .join(' | ');
  console.log(`## secrets

HTTPS through the egress gateway with a secret injected (the tunnel intercepted: TLS terminated
with a leaf of the node's CA, the Authorization placeholder replaced, a TLS connection of the
gateway's own to the upstream) vs the same requests through a plain CONNECT tunnel of the same
gateway (TLS end to end, bytes relayed). ${
    IN_PROCESS
      ? 'Gateway, client and upstream (node:https) in one Node process'
      : 'The gateway in its own Node process (as in `sbx serve`), client and upstream (node:https) in another'
  }, loopback, 2 shared cores;
\`${IN_PROCESS ? '' : 'BENCH_GATEWAY=process '}node bench/secrets.mjs\`. Wall-time medians of ${FILE_RUNS} for the 10 MiB rows
(the small GETs: 5 rounds, the median × 5); CPU is ${cpuOf}
user+system time per request (mean). Injections counted: ${injected.join(', ')}.

| request | ${head.join(' | ')} |
| --- | ${head.map(() => '--- | --- | --- | --- | ---').join(' | ')} |
${rows.map(([l, r]) => `| ${l} | ${cells(r)} |`).join('\n')}
`);
  process.exit(0);
}
