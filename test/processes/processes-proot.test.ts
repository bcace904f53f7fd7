/** Background processes on proot (attached: held by the control plane). */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { processContract } from './processes.contract.js';

const prootOn = process.env.SBX_TEST_PROOT === '1';

describe.skipIf(!prootOn)(`background processes on proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let srv: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-proc-proot-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    srv = await startTestServer({ providers: { default: 'proot', proot: { rootfs } } });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    // The proot provider keeps its sandboxes under the temp directory, named by the installation.
    if (installation)
      for (const n of [`sbx-proot-${installation}`, `.sbx-proot-${installation}.sbx`])
        rmSync(join(tmpdir(), n), { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  processContract(() => ({
    url: srv.url,
    runner: 'attached',
    spawn: async () => (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string,
  }));
});
