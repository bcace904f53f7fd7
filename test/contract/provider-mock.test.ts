import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const fixture = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-mock-contract-'));
  return {
    provider: createMockProvider({ rootDir: join(dir, 'sandboxes') }),
    image: 'host',
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
};
runProviderContract('mock', fixture, { hostFilesystem: true });
runProviderPathContract('mock', fixture, { hostFilesystem: true });
runExecErrorsContract('mock', fixture, { exactShell: true });
