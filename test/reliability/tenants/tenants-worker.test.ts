/** The tenant attack suite (issue 30) through an `sbx worker`: the sandboxes run on the worker. */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import type { Worker } from '../../../src/compose/worker.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { startTestWorker } from '../../helpers/worker.js';
import { tenantAttacks } from './tenants.contract.js';

const KEY = 'tenant-attack-key-0123456789abcdef';
const ADMIN = 'tenant-attack-admin-0123456789abcdef';
const as = (user: string) => ({ 'x-api-key': KEY, 'x-user-id': user });

describe('tenants through an sbx worker, ownership enforced', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-tenants-worker-'));
    cp = await startTestServer({
      server: { local_worker: false },
      auth: { api_key: KEY, admin_api_key: ADMIN, enforce_ownership: true, worker_token: 'tenant-worker-token' },
    });
    worker = await startTestWorker(dir, { id: 'tw', controlPlane: cp.url, auth: { worker_token: 'tenant-worker-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  tenantAttacks('an sbx worker on mock (owners)', () => ({
    url: cp.url,
    victim: as('victim'),
    attacker: as('attacker'),
    admin: { 'x-api-key': KEY, 'x-admin-api-key': ADMIN },
    snapshots: true,
    volumes: true,
    tag: randomBytes(3).toString('hex'),
    rpcUrl: worker.rpcUrl ?? undefined,
  }));
});
