/** Pause and resume on proot (DESIGN.md §16): the cgroup freezer holds the tracer and its tracees together. */
import { describe } from 'vitest';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { pauseContract } from './pause.contract.js';

describe.skipIf(PROVIDER_SKIP.proot !== undefined)(providerTitle('proot', 'pause and resume on proot'), () => {
  const srv = useProviderServer('proot');
  pauseContract(() => srv());
});
