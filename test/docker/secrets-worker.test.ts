/**
 * Secrets injected by a remote worker's gateway (DESIGN.md §15) are counted on the control plane:
 * a control plane that runs no sandboxes itself, a real `sbx worker` with the docker provider, a
 * secret created with `allow_plain_http` for one host, and a filtered sandbox bound to it. The
 * sandbox sends its placeholder over plain HTTP through the worker's gateway (the worker fetched
 * the value over its RPC); the upstream, in a network namespace of its own, receives the value; the
 * worker counts the injection and its heartbeat carries it into `sbx_egress_secret_injections_total`.
 * Needs root, docker and namespaces: SBX_TEST_DOCKER=1 SBX_TEST_NETNS=1.
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
import { startNetnsUpstream, type NetnsUpstream } from '../helpers/netns-upstream.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

const NETNS_SKIP = process.env.SBX_TEST_NETNS === '1' ? undefined : 'SBX_TEST_NETNS is not 1 (needs root and network namespaces)';
const SKIP = DOCKER_SKIP ?? NETNS_SKIP;
const tag = Math.floor(Math.random() * 200) + 20;
const NS = `sbxsw${process.pid}`;
const VETH = `sbxsw${tag}h`;
const NET = `198.19.${tag}`;
const UP = `${NET}.2`;
const TOKEN = 'secrets-worker-token';
const ALICE = { 'x-user-id': 'alice' };
const VALUE = 'worker-injected-value-3e7a9c';

/** Plain HTTP on 80: answers with the Authorization header it received. */
const SERVER = `
const http = require('node:http');
http.createServer((req, res) => res.end('auth=' + (req.headers.authorization || ''))).listen(80, process.argv[2]);
process.stdout.write('ready\\n');
`;

describe.skipIf(SKIP !== undefined)(dockerTitle(`secrets on a remote worker${NETNS_SKIP ? ` (skipped: ${NETNS_SKIP})` : ''}`), () => {
  let docker: Docker;
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  let upstream: NetnsUpstream | undefined;
  let id: string;

  const metric = async () => {
    const text = (await call(cp.url, 'GET', '/api/v1/metrics/prometheus')).text;
    return Number(/^sbx_egress_secret_injections_total (\d+)$/m.exec(text)?.[1] ?? -1);
  };

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-secrets-worker-'));
    writeFileSync(join(dir, 'server.cjs'), SERVER);
    upstream = await startNetnsUpstream(NS, VETH, NET, join(dir, 'server.cjs'), [UP]);
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
          id: 'secw',
          control_plane_url: cp.url,
          listen_addr: '127.0.0.1:0',
          heartbeat_interval: '1s',
          state_path: join(dir, 'secw.db'),
        },
        logging: { level: 'silent' },
      } as never,
    });
    worker = await createWorker(config, {
      home: dir,
      logger: pino({ level: 'silent' }),
      egressResolve: async (name) => (name === 'up.test' ? [UP] : []),
    });
    await worker.start();
    const made = await call(
      cp.url,
      'POST',
      '/api/v1/secrets',
      { name: 'API_TOKEN', value: VALUE, hosts: ['up.test'], allow_plain_http: true },
      ALICE,
    );
    expect(made.status, made.text).toBe(201);
    const res = await call(
      cp.url,
      'POST',
      '/api/v1/sandboxes',
      { provider: 'docker', image: TEST_IMAGE, memory_mb: 64, egress: { allow: ['up.test'] }, secrets: ['API_TOKEN'] },
      ALICE,
    );
    expect(res.status, res.text).toBe(201);
    id = res.body.id;
    expect((await cp.plane.deps.store.getSandbox(id))?.worker_id).toBe('secw');
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

  it("the worker's gateway injects the value, and the injection reaches the control plane's metric with its heartbeat", async () => {
    await worker.heartbeat();
    const before = await metric();
    expect(before).toBeGreaterThanOrEqual(0);
    const sent = await call(
      cp.url,
      'POST',
      `/api/v1/sandboxes/${id}/exec`,
      { command: 'wget -q -O - --header "Authorization: Bearer $API_TOKEN" http://up.test/v1', timeout: '30s' },
      ALICE,
    );
    expect(sent.status, sent.text).toBe(200);
    expect(sent.body.stdout).toBe(`auth=Bearer ${VALUE}`);
    await worker.heartbeat();
    const w = await call(cp.url, 'GET', '/api/v1/workers/secw');
    expect(w.body.egress.injections).toBeGreaterThanOrEqual(1);
    expect(await metric()).toBe(before + 1);
    expect(w.text + (await call(cp.url, 'GET', '/api/v1/metrics/prometheus')).text).not.toContain(VALUE);
  });
});
