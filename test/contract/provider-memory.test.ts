import { afterAll, beforeAll, vi } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

// The unit tier (DESIGN §6): the contract's sleeps and deadlines run on fake timers that jump to
// the next timer whenever nothing else is pending, so `sleep 2` and a 15 s deadline cost no time.
beforeAll(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
  vi.setTimerTickMode('nextTimerAsync');
});
afterAll(() => {
  vi.useRealTimers();
});

const fixture = async () => ({ provider: createMemoryProvider(), image: 'memory', cleanup: async () => undefined });
runProviderContract('memory', fixture);
runProviderPathContract('memory', fixture);
runExecErrorsContract('memory', fixture, { exactShell: true });
