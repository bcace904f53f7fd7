import { randomBytes } from 'node:crypto';
import { describe } from 'vitest';
import { createHostedProvider } from '../../src/adapters/providers/hosted/index.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

/**
 * The hosted provider against the real service: E2B (or a compatible deployment at
 * SBX_TEST_HOSTED_BASE_URL), with SBX_TEST_HOSTED_TEMPLATE (default `base`). It spawns real
 * sandboxes on the key's account (billed) and destroys them at the end; sandboxes left by a crashed
 * run end on their own after SBX_TEST_HOSTED_TIMEOUT_S (default 600) seconds.
 */
const apiKey = process.env.SBX_TEST_HOSTED_API_KEY;
const reason = 'set SBX_TEST_HOSTED_API_KEY (and optionally SBX_TEST_HOSTED_BASE_URL, SBX_TEST_HOSTED_TEMPLATE); spawns billed sandboxes';
if (!apiKey) console.info(`skipping the live hosted provider contract: ${reason}`);

describe.skipIf(!apiKey)(`hosted provider, live (${reason})`, () => {
  const fixture = async () => ({
    provider: createHostedProvider({
      apiKey: apiKey!,
      baseUrl: process.env.SBX_TEST_HOSTED_BASE_URL,
      template: process.env.SBX_TEST_HOSTED_TEMPLATE,
      sandboxTimeoutS: Number(process.env.SBX_TEST_HOSTED_TIMEOUT_S ?? 600),
      // Its own label: the inventory checks see only this run's sandboxes.
      installationId: `live-${randomBytes(4).toString('hex')}`,
    }),
    image: process.env.SBX_TEST_HOSTED_TEMPLATE ?? 'base',
    cleanup: async () => undefined,
  });
  runProviderContract('hosted (live)', fixture);
  runProviderPathContract('hosted (live)', fixture);
  runExecErrorsContract('hosted (live)', fixture, { exactShell: true });
});
