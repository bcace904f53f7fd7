/**
 * File watch of a sandbox on a remote worker (DESIGN §7, §16): the control plane's core rules over
 * `worker.file_watch`, the worker's mock provider watching through the host-mode sbx-agent.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';
import { watchContract } from '../http/file-watch.contract.js';

describe('file watch through a worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-watch-worker-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'fw-token' } });
    worker = await startTestWorker(dir, { id: 'fw', controlPlane: cp.url, auth: { worker_token: 'fw-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  watchContract(() => ({
    url: cp.url,
    spawn: async () => {
      const res = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.worker_id).toBe('fw');
      return res.body.id as string;
    },
    count: (id) => cp.plane.deps.files.watcher.count(id),
  }));
});
