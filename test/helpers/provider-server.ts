/**
 * One fixture for the suites that run a contract against each provider through a real server
 * (pause, processes, file watch): the server up on mock, proot (a busybox rootfs made for it),
 * docker (the test image) or a remote worker (mock behind the worker RPC), a `spawn()` that
 * checks the sandbox was made, and the cleanup each provider needs (proot's sandbox directories,
 * docker's containers, the worker). proot and docker skip through their env flags (DESIGN §6).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { DOCKER_SKIP, removeInstallation, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { RestartablePlane } from '../processes/helpers.js';
import { call } from './http.js';
import { mergeOverrides, startTestServer, type TestServer } from './server.js';
import { startTestWorker } from './worker.js';

export type FixtureProvider = 'mock' | 'proot' | 'docker' | 'worker';

/** Why a provider's suites skip here (undefined: they run). */
export const PROVIDER_SKIP: Record<FixtureProvider, string | undefined> = {
  mock: undefined,
  proot: process.env.SBX_TEST_PROOT === '1' ? undefined : 'SBX_TEST_PROOT is not 1',
  docker: DOCKER_SKIP,
  worker: undefined,
};

/** A suite title that says why it skips, when it does. */
export const providerTitle = (provider: FixtureProvider, title: string): string =>
  PROVIDER_SKIP[provider] ? `${title} (skipped: ${PROVIDER_SKIP[provider]})` : title;

export interface ProviderServer extends TestServer {
  provider: FixtureProvider;
  /** The engine, on docker. */
  docker?: Docker;
  /** The worker that runs the sandboxes, with `worker`. */
  worker?: Worker;
  /** A second control plane on this provider that a test stops and starts; its `remove()` removes all it made. */
  restartable(): RestartablePlane;
  /** Spawns a sandbox (failing the test unless it was made, on the remote worker for `worker`); its id. */
  spawn(body?: Record<string, unknown>): Promise<string>;
}

/** Config of a control plane on `provider`, with `dir` the fixture's own directory. */
export function providerConfig(provider: FixtureProvider, dir: string): Record<string, unknown> {
  if (provider === 'proot') {
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    return { providers: { default: 'proot', proot: { rootfs } } };
  }
  if (provider === 'docker') return { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } };
  if (provider === 'worker') return { server: { local_worker: false }, auth: { worker_token: WORKER_TOKEN } };
  return { providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } } };
}

const WORKER_TOKEN = 'fixture-worker-token';

/** Starts a server on `provider` with `overrides` on top; `close()` removes all it made. */
export async function startProviderServer(provider: FixtureProvider, overrides: Record<string, unknown> = {}): Promise<ProviderServer> {
  const dir = mkdtempSync(join(tmpdir(), `sbx-fixture-${provider}-`));
  let srv: TestServer | undefined;
  let worker: Worker | undefined;
  try {
    const docker = provider === 'docker' ? await requireEngine() : undefined;
    srv = await startTestServer(mergeOverrides(providerConfig(provider, dir), overrides));
    if (provider === 'worker')
      worker = await startTestWorker(dir, { id: 'fw', controlPlane: srv.url, auth: { worker_token: WORKER_TOKEN } });
    const server = srv;
    const installation = server.plane.installationId;
    return {
      ...server,
      provider,
      docker,
      worker,
      restartable() {
        if (provider !== 'mock' && provider !== 'docker') throw new Error(`no restartable plane on ${provider} here`);
        return new RestartablePlane((d) => providerConfig(provider, d), docker ? (i) => removeInstallation(docker, i) : undefined);
      },
      async spawn(body = {}) {
        const r = await call(server.url, 'POST', '/api/v1/sandboxes', body);
        if (r.status !== 201) throw new Error(`spawn on ${provider}: ${r.status} ${JSON.stringify(r.body)}`);
        if (provider === 'worker' && r.body.worker_id !== 'fw') throw new Error(`spawned on ${r.body.worker_id}, not the worker`);
        return r.body.id as string;
      },
      async close() {
        await worker?.stop();
        await server.close();
        if (docker) await removeInstallation(docker, installation);
        // The proot provider keeps its sandboxes under the temp directory, named by the installation.
        if (provider === 'proot')
          for (const n of [`sbx-proot-${installation}`, `.sbx-proot-${installation}.sbx`])
            rmSync(join(tmpdir(), n), { recursive: true, force: true });
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await worker?.stop();
    await srv?.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Starts the server before the suite's tests and closes it after them; the getter answers it
 * (call it inside tests and hooks, not while the suite is being collected).
 */
export function useProviderServer(provider: FixtureProvider, overrides: Record<string, unknown> = {}): () => ProviderServer {
  let srv: ProviderServer | undefined;
  beforeAll(async () => {
    srv = await startProviderServer(provider, overrides);
  }, 120_000);
  afterAll(async () => {
    await srv?.close();
  }, 60_000);
  return () => {
    if (!srv) throw new Error(`the ${provider} server is not up`);
    return srv;
  };
}
