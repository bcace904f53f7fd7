/** The tenant attack suite (issue 30) through an `sbx worker`: the sandboxes run on the worker. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import type { Worker } from '../../../src/compose/worker.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { startTestWorker } from '../../helpers/worker.js';
import { OWNERS_AUTH, ownersAt, tenantAttacks } from './tenants.contract.js';

describe('tenants through an sbx worker, ownership enforced', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-tenants-worker-'));
    cp = await startTestServer({
      server: { local_worker: false },
      auth: { ...OWNERS_AUTH, worker_token: 'tenant-worker-token' },
    });
    worker = await startTestWorker(dir, { id: 'tw', controlPlane: cp.url, auth: { worker_token: 'tenant-worker-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  tenantAttacks('an sbx worker on mock (owners)', () => ownersAt(cp.url, { rpcUrl: worker.rpcUrl ?? undefined }));
});
