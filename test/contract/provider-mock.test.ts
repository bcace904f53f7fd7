import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { runProviderContract } from './provider.contract.js';

runProviderContract('mock', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-mock-contract-'));
  return {
    provider: createMockProvider({ rootDir: join(dir, 'sandboxes') }),
    image: 'host',
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
}, { hostFilesystem: true });
