#!/usr/bin/env node
// File watch latency on docker (DESIGN §16): a real server (HTTP on port 0) with the docker
// provider and sbx-agent; one NDJSON watch of /w; each iteration runs `echo N > /w/fN` through the
// exec API and times from sending that exec to the watch's `write /w/fN` line arriving, beside the
// exec's own round trip. The event path: inotify in the container → the agent's WATCH stream on
// its one connection → core (coalescing, limits) → the NDJSON response.
// Usage: scripts/test-docker-up.sh && npm run build && node bench/watch.mjs
// Env: BENCH_ITERATIONS (default 50), SBX_TEST_IMAGE.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { pino } from 'pino';

const ITERATIONS = Number(process.env.BENCH_ITERATIONS ?? 50);
const IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
const SOCKET = process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock';
const pct = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const f = (n) => n.toFixed(2);

try {
  const docker = new Docker({ socketPath: SOCKET });
  await docker.ping();
  await docker.getImage(IMAGE).inspect();
} catch {
  console.log(`## pause, fork, watch\n\nwatch: skipped (no docker engine on ${SOCKET} or image ${IMAGE} missing).\n`);
  process.exit(0);
}
const { createControlPlane } = await import('../dist/compose/control-plane.js');
const { loadConfig } = await import('../dist/config/index.js');

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-watch-'));
const { config } = await loadConfig({
  cwd: dir,
  home: dir,
  env: {},
  overrides: {
    server: { host: '127.0.0.1', port: 0 },
    database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    providers: { default: 'docker', docker: { socket_path: SOCKET } },
    defaults: { image: IMAGE, memory_mb: 64 },
    logging: { level: 'silent' },
  },
});
const plane = await createControlPlane(config, { home: dir, logger: pino({ level: 'silent' }), reconcile: false });
const url = await plane.listen();
const post = async (path, body) => {
  const r = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return r.json();
};
let id;
try {
  id = (await post('/api/v1/sandboxes', {})).id;
  await post(`/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
  const ac = new AbortController();
  const res = await fetch(`${url}/api/v1/sandboxes/${id}/files/watch?path=/w`, { signal: ac.signal });
  if (res.status !== 200) throw new Error(`watch answered ${res.status}: ${await res.text()}`);
  const waiters = new Map();
  void (async () => {
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body) {
        buf += dec.decode(chunk, { stream: true });
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const ev = JSON.parse(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          if (ev.type === 'write') waiters.get(ev.path)?.(performance.now());
        }
      }
    } catch {
      /* aborted at the end */
    }
  })();
  const toEvent = [];
  const roundTrip = [];
  for (let i = 0; i < ITERATIONS + 3; i++) {
    const path = `/w/f${i}`;
    const seen = new Promise((resolve, reject) => {
      waiters.set(path, resolve);
      setTimeout(() => reject(new Error(`no event for ${path} in 10 s`)), 10_000).unref();
    });
    const t0 = performance.now();
    const ex = await post(`/api/v1/sandboxes/${id}/exec`, { command: `echo ${i} > ${path}` });
    const t1 = performance.now();
    if (ex.exit_code !== 0) throw new Error(`exec failed: ${JSON.stringify(ex)}`);
    const te = await seen;
    if (i >= 3) {
      toEvent.push(te - t0);
      roundTrip.push(t1 - t0);
    }
  }
  ac.abort();
  console.log(`## pause, fork, watch

watch: a real server on docker with sbx-agent (\`node bench/watch.mjs\`, ${ITERATIONS} iterations after 3 warm-up,
on a shared 2-core machine). Each iteration runs \`echo N > /w/fN\` through the exec API; "exec → event"
is from sending that exec to the watch's \`write\` line arriving over NDJSON, so it includes starting
the command. In ms.

| measure | p50 | p95 |
|---|---:|---:|
| exec → watch event (write) | ${f(pct(toEvent, 0.5))} | ${f(pct(toEvent, 0.95))} |
| exec round trip (for scale) | ${f(pct(roundTrip, 0.5))} | ${f(pct(roundTrip, 0.95))} |
`);
} finally {
  if (id) await fetch(`${url}/api/v1/sandboxes/${id}`, { method: 'DELETE' }).catch(() => undefined);
  await plane.close();
  rmSync(dir, { recursive: true, force: true });
}
