/**
 * The Provider contract suite over real HTTP: the custom HTTP provider talking to the reference
 * server (`sbx provider-server`'s app) on a real port, backed by mock — and by proot with
 * SBX_TEST_PROOT=1. Proves the contract in docs/providers/custom-http.md carries everything the
 * port asks for.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { createCustomHttpProvider } from '../../src/adapters/providers/custom-http/index.js';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import type { Provider } from '../../src/core/ports/index.js';
import { buildProviderServer } from '../../src/transports/provider-server/app.js';
import {
  DOCKER_SKIP,
  dockerTitle,
  removeInstallation,
  requireEngine,
  TEST_IMAGE,
  testInstallationId,
  testProvider,
} from '../docker/engine.js';
import { runProviderContract, type ProviderFixture } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const KEY = 'contract-key-5f0c1d9e2b7a4c38';

async function overHttp(
  backend: Provider,
  image: string,
  dir: string,
  extra: () => Promise<void> = async () => undefined,
): Promise<ProviderFixture> {
  const app = await buildProviderServer({ provider: backend, apiKey: KEY });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  const provider = createCustomHttpProvider({ baseUrl: url, apiKey: KEY, timeoutMs: 10_000 });
  // Capabilities come from the backend's health answer, as `serve` reads them before listing.
  await provider.health();
  return {
    provider,
    image,
    cleanup: async () => {
      await app.close();
      await backend.close?.();
      await extra();
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

const mockFixture = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-contract-'));
  return overHttp(createMockProvider({ rootDir: join(dir, 'sandboxes') }), 'host', dir);
};
runProviderContract('custom-http (reference server on mock)', mockFixture, { hostFilesystem: true });
runProviderPathContract('custom-http (reference server on mock)', mockFixture, { hostFilesystem: true });
runExecErrorsContract('custom-http (reference server on mock)', mockFixture, { exactShell: true });

const proot = process.env.SBX_TEST_PROOT === '1';
const reason = 'set SBX_TEST_PROOT=1; needs proot and busybox-static';
describe.skipIf(!proot)(`custom-http over proot (${reason})`, () => {
  const prootFixture = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-chttp-proot-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    return overHttp(createProotProvider({ rootfs, workDir: join(dir, 'sandboxes') }), 'busybox', dir);
  };
  runProviderContract('custom-http (reference server on proot)', prootFixture, { hostFilesystem: true });
  runProviderPathContract('custom-http (reference server on proot)', prootFixture, { hostFilesystem: true });
  runExecErrorsContract('custom-http (reference server on proot)', prootFixture, { exactShell: true });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('custom-http over docker'), () => {
  const dockerFixture = async () => {
    const docker = await requireEngine();
    const installationId = testInstallationId();
    return overHttp(testProvider(installationId), TEST_IMAGE, '', () => removeInstallation(docker, installationId));
  };
  runProviderContract('custom-http (reference server on docker)', dockerFixture);
  runExecErrorsContract('custom-http (reference server on docker)', dockerFixture, { exactShell: true });
  runProviderPathContract('custom-http (reference server on docker)', dockerFixture);
});
