/** Background processes of a sandbox on a remote worker: held open by the control plane over the worker RPC. */
import { describe } from 'vitest';
import { useProviderServer } from '../helpers/provider-server.js';
import { processContract } from './processes.contract.js';

describe('background processes on a remote worker', () => {
  const srv = useProviderServer('worker');
  // The worker runs its sandboxes on mock.
  processContract(() => ({ ...srv(), runner: 'attached', provider: 'mock' }));
});
