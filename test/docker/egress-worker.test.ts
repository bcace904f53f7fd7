/**
 * Egress enforcement on a remote worker (DESIGN.md §10): a control plane that runs no sandboxes
 * itself, and a real `sbx worker` with the docker provider, whose own gateway enforces the rules
 * the control plane sends with `worker.spawn` and each `worker.egress_update`. The upstream is a
 * network namespace joined by a veth pair (HTTP at 198.18.x.2); names come from a resolver only
 * the worker's gateway uses. Denials reach the control plane's event stream; the worker's verdict
 * counts reach its metrics with the heartbeat. Needs root, docker and namespaces:
 * SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { filteredNetworkName } from '../../src/adapters/providers/docker/egress.js';
import { createWorker, type Worker } from '../../src/compose/worker.js';
import { loadConfig } from '../../src/config/index.js';
import { call } from '../helpers/http.js';
import { sh, startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and network namespaces)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxew${process.pid}`;
const VETH = `sbxew${tag}h`;
const NET = `198.19.${tag}`;
const UP = `${NET}.2`;
const NAMES: Record<string, string[]> = { 'up.test': [UP], 'other.test': [UP] };
const TOKEN = 'egress-worker-token';

const SERVER = `
const http = require('node:http');
http.createServer((req, res) => res.end('upstream ' + req.headers.host + ' ' + req.url)).listen(80, process.argv[2]);
process.stdout.write('ready\\n');
`;

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(SKIP !== undefined)(dockerTitle(`egress on a remote worker${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`), () => {
  let docker: Docker;
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  let upstream: NetnsUpstream | undefined;
  let id: string;
  let pid: number;
  let workerConfig: Awaited<ReturnType<typeof loadConfig>>['config'];
  const startWorker = async () => {
    const w = await createWorker(workerConfig, {
      home: dir,
      logger: pino({ level: 'silent' }),
      egressResolve: async (name) => NAMES[name] ?? [],
    });
    await w.start();
    return w;
  };

  const exec = async (command: string) =>
    (await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, timeout: '30s' })).body as {
      exit_code: number;
      stdout: string;
      stderr: string;
    };

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-egress-worker-'));
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [UP]);
    // The control plane runs no sandboxes itself: every spawn is placed on the worker.
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
    const { config } = await loadConfig({
      cwd: dir,
      home: dir,
      env: {},
      overrides: {
        providers: { default: 'docker', docker: { socket_path: SOCKET } },
        defaults: { image: TEST_IMAGE, memory_mb: 64 },
        auth: { worker_token: TOKEN },
        worker: {
          id: 'egw',
          control_plane_url: cp.url,
          listen_addr: '127.0.0.1:0',
          heartbeat_interval: '1s',
          state_path: join(dir, 'egw.db'),
        },
        logging: { level: 'silent' },
      } as never,
    });
    workerConfig = config;
    worker = await startWorker();
  }, 120_000);

  afterAll(async () => {
    const installation = worker?.installationId;
    if (docker && installation) await removeInstallation(docker, installation);
    await worker?.stop();
    await cp?.close();
    if (docker && installation)
      await docker
        .getNetwork(filteredNetworkName(installation))
        .remove()
        .catch(() => undefined);
    await upstream?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('the worker advertises enforcement; a filtered spawn is placed there with its rules', async () => {
    const w = await call(cp.url, 'GET', '/api/v1/workers/egw');
    expect(w.body.capabilities).toContain('egress:docker');
    const res = await call(cp.url, 'POST', '/api/v1/sandboxes', {
      provider: 'docker',
      image: TEST_IMAGE,
      memory_mb: 64,
      egress: { allow: ['UP.test.'] },
    });
    expect(res.status, res.text).toBe(201);
    id = res.body.id;
    expect(res.body.network).toBe('filtered');
    expect(res.body.egress).toEqual({ allow: ['up.test'], deny: [] });
    expect((await cp.plane.deps.store.getSandbox(id))?.worker_id).toBe('egw');
    const info = await docker.getContainer(`sbx-${id}`).inspect();
    pid = info.State.Pid;
    expect(Object.keys(info.NetworkSettings.Networks)).toEqual([filteredNetworkName(worker.installationId)]);
  });

  it("an allowed name passes the worker's gateway; another is denied, and the denial reaches the control plane", async () => {
    const ok = await exec('wget -q -O - http://up.test/hello');
    expect(ok.stdout).toBe('upstream up.test /hello');
    const no = await exec('wget -q -O - http://other.test/denied 2>&1');
    expect(no.exit_code).not.toBe(0);
    const event = await until('network.denied on the control plane', async () =>
      cp.plane.deps.bus
        .recent()
        .find((e) => e.type === 'network.denied' && e.sandbox_id === id && (e.data as { host?: string }).host === 'other.test'),
    );
    expect(event.worker_id).toBe('egw');
    expect(event.data).toEqual({ sandbox_id: id, host: 'other.test', port: 80, reason: 'no_rule' });
    // The console line is the worker's, in the sandbox's own console.
    const logs = await call(cp.url, 'GET', `/api/v1/sandboxes/${id}/logs?lines=200`);
    expect(logs.body.join('\n')).toContain('sbx egress: denied other.test:80 (no_rule)');
  });

  it("a direct connection that ignores the proxy fails from the worker's sandbox", async () => {
    const direct = await sh('nsenter', [`--net=/proc/${pid}/ns/net`, 'curl', '-sS', '--noproxy', '*', '--max-time', '3', `http://${UP}/`]);
    expect(direct.code).not.toBe(0);
  });

  it('a PUT through the control plane swaps the verdicts on the worker', async () => {
    const put = await call(cp.url, 'PUT', `/api/v1/sandboxes/${id}/egress`, { allow: ['other.test'], deny: [] });
    expect(put.status, put.text).toBe(200);
    expect(put.body.egress).toEqual({ allow: ['other.test'], deny: [] });
    expect((await exec('wget -q -O - http://other.test/now')).stdout).toBe('upstream other.test /now');
    expect((await exec('wget -q -O - http://up.test/now 2>&1')).exit_code).not.toBe(0);
  });

  it('a restarted worker keeps enforcing the rules it was sent (its state), on the same network', async () => {
    await worker.stop();
    worker = await startWorker();
    expect((await exec('wget -q -O - http://other.test/again')).stdout).toBe('upstream other.test /again');
    expect((await exec('wget -q -O - http://up.test/again 2>&1')).exit_code).not.toBe(0);
  });

  it("the worker's verdict counts arrive with its heartbeat: the worker object and the metrics", async () => {
    await worker.heartbeat();
    const w = await call(cp.url, 'GET', '/api/v1/workers/egw');
    expect(w.body.egress.allowed).toBeGreaterThanOrEqual(2);
    expect(w.body.egress.denied).toBeGreaterThanOrEqual(2);
    const metrics = (await call(cp.url, 'GET', '/api/v1/metrics/prometheus')).text;
    const count = (verdict: string) =>
      Number(new RegExp(`sbx_egress_connections_total\\{verdict="${verdict}"\\} (\\d+)`).exec(metrics)?.[1] ?? -1);
    expect(count('allowed')).toBe(w.body.egress.allowed);
    expect(count('denied')).toBe(w.body.egress.denied);
  });

  it('destroying the sandbox ends its rules on the worker: its address is unknown to the gateway', async () => {
    expect((await call(cp.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    const gone = await docker
      .getContainer(`sbx-${id}`)
      .inspect()
      .then(
        () => true,
        () => false,
      );
    expect(gone).toBe(false);
  });
});
