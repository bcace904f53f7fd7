/**
 * The provider contract against the firecracker provider with a stand-in VMM: the validating API
 * server (every Firecracker request checked against the published description) and the fake guest
 * agent on the vsock socket (real commands and files on this host, under the sandbox's root-drive
 * directory). It verifies the host side — API sequence, agent protocol, the provider's semantics —
 * not a guest: see provider-firecracker-live.test.ts for that.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createFirecrackerProvider } from '../../src/adapters/providers/firecracker/index.js';
import { fakeLauncher } from '../helpers/firecracker-fake-vm.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const fixture = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-fcf-'));
  const rootfs = join(dir, 'rootfs');
  mkdirSync(join(rootfs, 'workspace'), { recursive: true });
  mkdirSync(join(rootfs, 'tmp'), { recursive: true });
  writeFileSync(join(dir, 'vmlinux'), 'k');
  // Stand-ins that pass the health checks; the VMM itself is the fake launcher.
  writeFileSync(join(dir, 'firecracker'), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(join(dir, 'kvm'), '');
  return {
    provider: createFirecrackerProvider({
      binary: join(dir, 'firecracker'),
      kvmPath: join(dir, 'kvm'),
      kernelPath: join(dir, 'vmlinux'),
      rootfsPath: rootfs,
      dataDir: join(dir, 'd'),
      spawnProcess: fakeLauncher().launch,
    }),
    image: 'default',
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
};
runProviderContract('firecracker-fake', fixture);
runProviderPathContract('firecracker-fake', fixture);
runExecErrorsContract('firecracker-fake', fixture, {});
