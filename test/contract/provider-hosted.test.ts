import { createHostedProvider } from '../../src/adapters/providers/hosted/index.js';
import { startE2bStandin } from '../helpers/e2b-standin.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

/**
 * The hosted (E2B-compatible) provider against the local stand-in of E2B's REST API and envd
 * (test/helpers/e2b-standin.ts), over real HTTP. Host-filesystem checks are not registered: a hosted
 * sandbox is a VM of its own (the stand-in's temp directories are a simplification, not the model).
 */
const fixture = async () => {
  const apiKey = 'e2b_' + 'f'.repeat(40);
  const standin = await startE2bStandin({ apiKey });
  return {
    provider: createHostedProvider({ apiKey, baseUrl: standin.url, envdUrl: (id) => standin.envdUrl(id), installationId: 'contract' }),
    image: 'base',
    cleanup: () => standin.close(),
  };
};
runProviderContract('hosted', fixture);
runProviderPathContract('hosted', fixture);
runExecErrorsContract('hosted', fixture, { exactShell: true });
