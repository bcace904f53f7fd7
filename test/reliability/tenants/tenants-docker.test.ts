/** The tenant attack suite (issue 30) on docker: owners with ownership enforced, and pool tenants. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../../docker/engine.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { tenantAttacks } from './tenants.contract.js';

const KEY = 'tenant-attack-key-0123456789abcdef';
const ADMIN = 'tenant-attack-admin-0123456789abcdef';
const as = (user: string) => ({ 'x-api-key': KEY, 'x-user-id': user });
const docker = { default: 'docker' };

describe.skipIf(DOCKER_SKIP)(dockerTitle('tenants on docker'), () => {
  describe('ownership enforced', () => {
    let srv: TestServer;
    beforeAll(async () => {
      await requireEngine();
      srv = await startTestServer({
        providers: docker,
        defaults: { image: TEST_IMAGE, memory_mb: 64 },
        auth: { api_key: KEY, admin_api_key: ADMIN, enforce_ownership: true },
      });
    }, 60_000);
    afterAll(async () => srv?.close());
    tenantAttacks('docker (owners)', () => ({
      url: srv.url,
      victim: as('victim'),
      attacker: as('attacker'),
      admin: { 'x-api-key': KEY, 'x-admin-api-key': ADMIN },
      snapshots: true,
      volumes: true,
      tag: randomBytes(3).toString('hex'),
    }));
  });

  describe('pool mode', () => {
    let srv: TestServer;
    beforeAll(async () => {
      await requireEngine();
      srv = await startTestServer({
        providers: docker,
        pool: { enabled: true, max_vms: 1, max_users_per_vm: 4, image: TEST_IMAGE, memory_mb: 128 },
      });
    }, 60_000);
    afterAll(async () => srv?.close());
    tenantAttacks('docker (pool tenants)', () => ({
      url: srv.url,
      victim: { 'x-user-id': 'victim' },
      attacker: { 'x-user-id': 'attacker' },
      snapshots: false,
      volumes: false,
      tag: randomBytes(3).toString('hex'),
    }));
  });
});
