/** Fork on mock and proot (DESIGN.md §16): the shared suite against a real server; the copy runs by handle (host-fs/copy.ts). */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { forkContract } from './fork.contract.js';

const QUOTA = 6;
const prootOn = process.env.SBX_TEST_PROOT === '1';

/** Fork images a host provider keeps: directories under `<data dir>/forks/<installation>/`. */
const heldIn = (dataDir: string, installation: string) => async () =>
  readdirSync(join(dataDir, 'forks', installation), { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => e.name);
const orEmpty = (f: () => Promise<string[]>) => () => f().catch(() => [] as string[]);

describe('fork on mock', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_sandboxes_per_owner: QUOTA } });
  }, 60_000);
  afterAll(async () => {
    await srv?.close();
  });
  forkContract(() => ({
    url: srv.url,
    forkImages: orEmpty(heldIn(join(srv.dir, 'mock-data'), srv.plane.installationId)),
    quotaOwner: 'fork-quota-owner',
    quota: QUOTA,
  }));
});

describe.skipIf(!prootOn)(`fork on proot${prootOn ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let srv: TestServer;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-fork-proot-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    srv = await startTestServer({
      providers: { default: 'proot', proot: { rootfs } },
      defaults: { max_sandboxes_per_owner: QUOTA },
    });
  }, 60_000);
  afterAll(async () => {
    const installation = srv?.plane.installationId;
    await srv?.close();
    if (installation)
      for (const n of [`sbx-proot-${installation}`, `sbx-proot-${installation}-data`, `.sbx-proot-${installation}.sbx`])
        rmSync(join(tmpdir(), n), { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  forkContract(
    () => ({
      url: srv.url,
      forkImages: orEmpty(heldIn(join(tmpdir(), `sbx-proot-${srv.plane.installationId}-data`), srv.plane.installationId)),
      quotaOwner: 'fork-quota-owner',
      quota: QUOTA,
    }),
    120_000,
  );
});
