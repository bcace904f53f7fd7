/** Background processes of a sandbox on a remote worker: held open by the control plane over the worker RPC. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';
import { processContract } from './processes.contract.js';

describe('background processes on a remote worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-proc-worker-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'proc-token' } });
    worker = await startTestWorker(dir, { id: 'pw', controlPlane: cp.url, auth: { worker_token: 'proc-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  processContract(() => ({
    url: cp.url,
    runner: 'attached',
    spawn: async () => {
      const r = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
      if (r.status !== 201) throw new Error(`spawn: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.id as string;
    },
  }));
});
