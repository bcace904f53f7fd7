/**
 * Fork through a worker (DESIGN.md §7, §16): a remote parent's forks are made on its worker
 * (`worker.fork` under the parent's lease, then `worker.spawn` from the copy), the worker keeps the
 * fork image and removes it (`worker.fork_delete`) with the last fork.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';
import { forkContract } from './fork.contract.js';

const QUOTA = 6;

describe('fork through a worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-fork-worker-'));
    cp = await startTestServer({
      server: { local_worker: false },
      auth: { worker_token: 'fk-token' },
      defaults: { max_sandboxes_per_owner: QUOTA },
    });
    worker = await startTestWorker(dir, { id: 'fw', controlPlane: cp.url, auth: { worker_token: 'fk-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const held = async () => {
    try {
      return readdirSync(join(dir, 'mock-data', 'forks', worker.installationId), { withFileTypes: true })
        .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
        .map((e) => e.name);
    } catch {
      return [];
    }
  };

  it('the forks of a remote sandbox run on its worker, which holds the fork image', async () => {
    const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
    expect(sb.status).toBe(201);
    expect(sb.body.worker_id).toBe('fw');
    const res = await call(cp.url, 'POST', `/api/v1/sandboxes/${sb.body.id}/fork`, { count: 2 });
    expect(res.status, res.text).toBe(201);
    for (const f of res.body.sandboxes as Array<{ id: string; worker_id: string }>) {
      expect(f.worker_id).toBe('fw');
      expect((await cp.plane.deps.store.getSandbox(f.id))?.fork).toMatch(/^fork-/);
    }
    expect(await held()).toHaveLength(1);
    for (const f of res.body.sandboxes as Array<{ id: string }>) await call(cp.url, 'DELETE', `/api/v1/sandboxes/${f.id}`);
    expect(await held()).toEqual([]);
    await call(cp.url, 'DELETE', `/api/v1/sandboxes/${sb.body.id}`);
  });

  forkContract(() => ({ url: cp.url, forkImages: held, quotaOwner: 'fork-quota-owner', quota: QUOTA }));
});
