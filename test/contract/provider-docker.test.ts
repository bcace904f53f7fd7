import { describe } from 'vitest';
import {
  DOCKER_SKIP,
  dockerTitle,
  removeInstallation,
  requireEngine,
  TEST_IMAGE,
  testInstallationId,
  testProvider,
} from '../docker/engine.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider'), () => {
  const fixture = async () => {
    const docker = await requireEngine();
    const installationId = testInstallationId();
    return {
      // The engine path (exec and archive APIs); provider-docker-agent.test.ts runs the same with sbx-agent.
      provider: testProvider(installationId, { agent: 'off' }),
      image: TEST_IMAGE,
      cleanup: () => removeInstallation(docker, installationId),
    };
  };
  runProviderContract('docker', fixture);
  runExecErrorsContract('docker', fixture, { exactShell: true });
  runProviderPathContract('docker', fixture);
});
