/**
 * The docker provider under gVisor (issue 17): the same contract with `providers.docker.runtime:
 * runsc` (scripts/test-runsc-up.sh registers Debian's runsc, networking off). Mandatory in CI
 * through SBX_TEST_RUNSC=1.
 */
import { describe } from 'vitest';
import { DOCKER_SKIP, removeInstallation, requireEngine, TEST_IMAGE, testInstallationId, testProvider } from '../docker/engine.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const SKIP =
  DOCKER_SKIP ??
  (process.env.SBX_TEST_RUNSC === '1' ? undefined : 'SBX_TEST_RUNSC is not 1 (run scripts/test-runsc-up.sh, then SBX_TEST_RUNSC=1)');

describe.skipIf(SKIP !== undefined)(`docker provider on gVisor (runsc)${SKIP ? ` (skipped: ${SKIP})` : ''}`, () => {
  const fixture = async () => {
    const docker = await requireEngine();
    const installationId = testInstallationId();
    return {
      provider: testProvider(installationId, { runtime: 'runsc', networkMode: 'none' }),
      image: TEST_IMAGE,
      cleanup: () => removeInstallation(docker, installationId),
    };
  };
  runProviderContract('docker+runsc', fixture);
  runExecErrorsContract('docker+runsc', fixture, { exactShell: true });
  runProviderPathContract('docker+runsc', fixture);
});
