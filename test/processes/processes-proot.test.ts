/** Background processes on proot (attached: held by the control plane). */
import { describe } from 'vitest';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { processContract } from './processes.contract.js';

describe.skipIf(PROVIDER_SKIP.proot !== undefined)(providerTitle('proot', 'background processes on proot'), () => {
  const srv = useProviderServer('proot');
  processContract(() => ({ ...srv(), runner: 'attached' }));
});
