/** The tenant attack suite (issue 30) on proot, ownership enforced. */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { startTestServer, type TestServer } from '../../helpers/server.js';
import { OWNERS_AUTH, ownersAt, tenantAttacks } from './tenants.contract.js';

const prootOn = process.env.SBX_TEST_PROOT === '1';

describe.skipIf(!prootOn)(`tenants on proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let srv: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-tenants-proot-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    srv = await startTestServer({
      providers: { default: 'proot', proot: { rootfs } },
      auth: OWNERS_AUTH,
    });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (installation)
      for (const n of [`sbx-proot-${installation}`, `.sbx-proot-${installation}.sbx`])
        rmSync(join(tmpdir(), n), { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  tenantAttacks('proot (owners)', () => ownersAt(srv.url));
});
