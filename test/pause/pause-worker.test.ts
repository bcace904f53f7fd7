/**
 * Pause and resume of a sandbox on a remote worker (DESIGN.md §16, §7): `worker.pause` and
 * `worker.resume` over the real RPC, lease-fenced; the worker's status reports `paused`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { RPC_LEASE_POLICY } from '../../src/contracts/worker-rpc.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';
import { pauseContract } from './pause.contract.js';

describe('pause and resume on a remote worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-pause-worker-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'pause-token' } });
    worker = await startTestWorker(dir, { id: 'pw', controlPlane: cp.url, auth: { worker_token: 'pause-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const spawn = async () => {
    const r = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
    if (r.status !== 201) throw new Error(`spawn: ${r.status} ${JSON.stringify(r.body)}`);
    expect(r.body.worker_id).toBe('pw');
    return r.body.id as string;
  };

  pauseContract(() => ({ url: cp.url, spawn }));

  it('pause and resume are lease-fenced; the worker reports the runtime paused', async () => {
    expect(RPC_LEASE_POLICY['worker.pause']).toBe('required');
    expect(RPC_LEASE_POLICY['worker.resume']).toBe('required');
    const id = await spawn();
    await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/pause`);
    const rec = (await cp.plane.deps.store.getSandbox(id))!;
    const remote = await cp.plane.deps.sandboxes.deps.locator.provider(rec);
    expect(await remote.status(rec.runtime_id!)).toBe('paused');
    // GET asks the worker (spec 4.11 rule 8): a paused runtime is no error.
    expect((await call(cp.url, 'GET', `/api/v1/sandboxes/${id}`)).body.state).toBe('paused');
    await call(cp.url, 'POST', `/api/v1/sandboxes/${id}/resume`);
    expect(await remote.status(rec.runtime_id!)).toBe('running');
  }, 60_000);
});
