/** The tenant attack suite (issue 30) on mock: owners with ownership enforced, and pool tenants. */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { tenantAttacks } from './tenants.contract.js';

const KEY = 'tenant-attack-key-0123456789abcdef';
const ADMIN = 'tenant-attack-admin-0123456789abcdef';
const as = (user: string) => ({ 'x-api-key': KEY, 'x-user-id': user });

describe('tenants on mock, ownership enforced', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { api_key: KEY, admin_api_key: ADMIN, enforce_ownership: true } });
  });
  afterAll(async () => srv?.close());
  tenantAttacks('mock (owners)', () => ({
    url: srv.url,
    victim: as('victim'),
    attacker: as('attacker'),
    admin: { 'x-api-key': KEY, 'x-admin-api-key': ADMIN },
    snapshots: true,
    volumes: true,
    tag: randomBytes(3).toString('hex'),
  }));
});

describe('tenants on mock, pool mode', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ pool: { enabled: true, max_vms: 1, max_users_per_vm: 4 } });
  });
  afterAll(async () => srv?.close());
  tenantAttacks('mock (pool tenants)', () => ({
    url: srv.url,
    victim: { 'x-user-id': 'victim' },
    attacker: { 'x-user-id': 'attacker' },
    // Pool sandboxes share a runtime: snapshots and volumes answer 501 for them (DESIGN.md §8).
    snapshots: false,
    volumes: false,
    tag: randomBytes(3).toString('hex'),
  }));
});
