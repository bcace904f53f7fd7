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
import { requireAgentBinary } from '../docker/agent-helpers.js';

// The docker provider with sbx-agent in every container (DESIGN §11): the same contract as the
// engine path (provider-docker.test.ts runs it with providers.docker.agent: off).
describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider with sbx-agent'), () => {
  const fixture = async () => {
    const docker = await requireEngine();
    const installationId = testInstallationId();
    return {
      provider: testProvider(installationId, { agent: 'auto', agentBinary: requireAgentBinary() }),
      image: TEST_IMAGE,
      cleanup: () => removeInstallation(docker, installationId),
    };
  };
  runProviderContract('docker', fixture);
  runExecErrorsContract('docker', fixture, { exactShell: true });
  runProviderPathContract('docker', fixture);
});
