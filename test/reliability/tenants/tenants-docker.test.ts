/** The tenant attack suite (issue 30) on docker: owners with ownership enforced, and pool tenants. */
import { afterAll, beforeAll, describe } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../../docker/engine.js';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { OWNERS_AUTH, ownersAt, poolTenantsAt, tenantAttacks } from './tenants.contract.js';

const docker = { default: 'docker' };

describe.skipIf(DOCKER_SKIP)(dockerTitle('tenants on docker'), () => {
  describe('ownership enforced', () => {
    let srv: TestServer;
    beforeAll(async () => {
      await requireEngine();
      srv = await startTestServer({
        providers: docker,
        defaults: { image: TEST_IMAGE, memory_mb: 64 },
        auth: OWNERS_AUTH,
      });
    }, 60_000);
    afterAll(async () => srv?.close());
    tenantAttacks('docker (owners)', () => ownersAt(srv.url));
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
    tenantAttacks('docker (pool tenants)', () => poolTenantsAt(srv.url));
  });
});
