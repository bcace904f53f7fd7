/** The tenant attack suite (issue 30) on mock: owners with ownership enforced, and pool tenants. */
import { afterAll, beforeAll, describe } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { OWNERS_AUTH, ownersAt, poolTenantsAt, tenantAttacks } from './tenants.contract.js';

describe('tenants on mock, ownership enforced', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: OWNERS_AUTH });
  });
  afterAll(async () => srv?.close());
  tenantAttacks('mock (owners)', () => ownersAt(srv.url));
});

describe('tenants on mock, pool mode', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ pool: { enabled: true, max_vms: 1, max_users_per_vm: 4 } });
  });
  afterAll(async () => srv?.close());
  tenantAttacks('mock (pool tenants)', () => poolTenantsAt(srv.url));
});
