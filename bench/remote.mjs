#!/usr/bin/env node
// Remote vs local: the same operations through a control plane on a sandbox it runs itself (local,
// mock provider) and on a sandbox of a `sbx worker` on this machine (remote: one more HTTP hop over
// the worker RPC). Both are real processes; iterations interleave so machine noise hits both alike.
// Usage: npm run build && node bench/remote.mjs   (prints a markdown section on stdout; progress on stderr)
// Env: BENCH_RUNS (exec runs, default 200), BENCH_FILE_RUNS (default 10).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processes } from './lib/procs.mjs';

import { freePort } from './lib/net.mjs';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env.BENCH_RUNS ?? 200);
const STREAM_RUNS = 20;
const FILE_RUNS = Number(process.env.BENCH_FILE_RUNS ?? 10);
const FILE = randomBytes(10 * 1024 * 1024);
const log = (m) => process.stderr.write(`bench remote: ${m}\n`);

if (!existsSync(join(ROOT, 'dist', 'cli.js'))) {
  console.log('## remote\n\nSkipped: dist/cli.js missing (run `npm run build`).\n');
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-remote-'));
const { start, cleanup } = processes(dir);

const api = async (base, method, path, body, raw) => {
  const res = await fetch(base + path, {
    method,
    headers: raw ? { 'content-type': 'application/octet-stream' } : body !== undefined ? { 'content-type': 'application/json' } : {},
    body: raw ?? (body !== undefined ? JSON.stringify(body) : undefined),
  });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res;
};

const time = async (fn) => {
  const t = performance.now();
  await fn();
  return performance.now() - t;
};
const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

try {
  const token = randomBytes(24).toString('hex');
  const [localPort, cpPort, rpcPort] = [await freePort(), await freePort(), await freePort()];
  const local = `http://127.0.0.1:${localPort}`;
  const cp = `http://127.0.0.1:${cpPort}`;
  log('starting a local control plane, a pure control plane and a worker');
  await start('local', ['serve', '--port', String(localPort)], { SVC_PROVIDERS_DEFAULT: 'mock' }, /listening on/);
  await start(
    'cp',
    ['serve', '--port', String(cpPort)],
    { SVC_SERVER_LOCAL_WORKER: 'false', SVC_AUTH_WORKER_TOKEN: token },
    /listening on/,
  );
  await start(
    'w1',
    ['worker', '--id', 'bench-w1', '--control-plane', cp, '--listen', `127.0.0.1:${rpcPort}`, '--heartbeat-interval', '1s'],
    { SVC_PROVIDERS_DEFAULT: 'mock', SVC_AUTH_WORKER_TOKEN: token },
    /sbx worker bench-w1 up/,
  );

  const sbLocal = (await (await api(local, 'POST', '/api/v1/sandboxes', { ttl: '1h' })).json()).id;
  const sbRemote = (await (await api(cp, 'POST', '/api/v1/sandboxes', { ttl: '1h' })).json()).id;
  const diag = await (await api(cp, 'GET', '/api/v1/admin/diagnostics')).json();
  if (diag.sandboxes.by_worker['bench-w1'] !== 1) throw new Error('the remote sandbox is not on bench-w1');
  const targets = { local: [local, sbLocal], remote: [cp, sbRemote] };
  const results = { local: { exec: [], stream: [], put: [], get: [] }, remote: { exec: [], stream: [], put: [], get: [] } };

  log(`exec echo hi ×${RUNS}`);
  for (let i = 0; i < RUNS; i++) {
    for (const k of ['local', 'remote']) {
      const [base, id] = targets[k];
      results[k].exec.push(
        await time(() => api(base, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo hi' }).then((r) => r.text())),
      );
    }
  }
  log(`streamed exec of 1 MiB ×${STREAM_RUNS}`);
  for (let i = 0; i < STREAM_RUNS; i++) {
    for (const k of ['local', 'remote']) {
      const [base, id] = targets[k];
      results[k].stream.push(
        await time(() =>
          api(base, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'head -c 1048576 /dev/zero | base64', stream: true }).then((r) =>
            r.arrayBuffer(),
          ),
        ),
      );
    }
  }
  log(`10 MiB file write and read ×${FILE_RUNS}`);
  for (let i = 0; i < FILE_RUNS; i++) {
    for (const k of ['local', 'remote']) {
      const [base, id] = targets[k];
      results[k].put.push(
        await time(() => api(base, 'POST', `/api/v1/sandboxes/${id}/files?path=/tmp/bench.bin`, undefined, FILE).then((r) => r.text())),
      );
      results[k].get.push(
        await time(async () => {
          const got = Buffer.from(await (await api(base, 'GET', `/api/v1/sandboxes/${id}/files?path=/tmp/bench.bin`)).arrayBuffer());
          if (got.length !== FILE.length) throw new Error('short read');
        }),
      );
    }
  }

  const mibps = (ms) => (10 / (ms / 1000)).toFixed(0);
  const row = (name, l, r, unit) => `| ${name} | ${unit(l)} | ${unit(r)} | ${(r / l).toFixed(2)} |`;
  const ms = (x) => `${x.toFixed(1)} ms`;
  const L = results.local;
  const R = results.remote;
  console.log(`## remote

Remote (a sandbox on a \`sbx worker\`, reached over the worker RPC) next to local (a sandbox the
control plane runs itself), both on the mock provider on this machine, interleaved in one run.
The ratio is remote/local (lower is better; 1.00 = no cost for the extra hop).

| operation | local | remote | remote/local |
|---|---|---|---|
${row(`exec \`echo hi\`, buffered, median of ${RUNS}`, q(L.exec, 50), q(R.exec, 50), ms)}
${row(`exec \`echo hi\`, buffered, p95 of ${RUNS}`, q(L.exec, 95), q(R.exec, 95), ms)}
${row(`streamed exec, 1.3 MiB of output, median of ${STREAM_RUNS}`, q(L.stream, 50), q(R.stream, 50), ms)}
${row(`10 MiB file write, median of ${FILE_RUNS}`, q(L.put, 50), q(R.put, 50), ms)}
${row(`10 MiB file read, median of ${FILE_RUNS}`, q(L.get, 50), q(R.get, 50), ms)}

Throughput (median): write ${mibps(q(L.put, 50))} MiB/s local, ${mibps(q(R.put, 50))} MiB/s remote;
read ${mibps(q(L.get, 50))} MiB/s local, ${mibps(q(R.get, 50))} MiB/s remote.
`);
} catch (err) {
  log(String(err?.stack ?? err));
  process.exitCode = 1;
} finally {
  cleanup();
}
