import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const enabled = process.env.SBX_TEST_PROOT === '1';
const reason = 'set SBX_TEST_PROOT=1; needs proot and busybox-static';
if (!enabled) console.info(`skipping the proot provider contract: ${reason}`);
const script = join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh');

describe.skipIf(!enabled)(`proot provider (${reason})`, () => {
  const fixture = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-proot-contract-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [script, rootfs], { stdio: 'pipe' });
    return {
      provider: createProotProvider({ rootfs, workDir: join(dir, 'sandboxes') }),
      image: 'busybox',
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  };
  runProviderContract('proot', fixture, { hostFilesystem: true });
  runProviderPathContract('proot', fixture, { hostFilesystem: true });
  runExecErrorsContract('proot', fixture, { exactShell: true });
});
