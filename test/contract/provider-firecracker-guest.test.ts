/**
 * The provider contract against the firecracker provider with the stand-in VMM (the validating API
 * server) and the REAL guest agent: `sbx-agent --unix` chrooted into each sandbox's root drive, a
 * directory built by make-rootfs.sh with the agent at /sbin/sbx-agent, as PID 1 of a PID
 * namespace; the vsock socket's `CONNECT 1024` handshake is played in front of it. What is left
 * out is the kernel: booting and virtio-vsock itself (provider-firecracker-live.test.ts).
 * Needs root (chroot, unshare) and busybox-static (SBX_TEST_PROOT=1, as the proot suites).
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe } from 'vitest';
import { createFirecrackerProvider } from '../../src/adapters/providers/firecracker/index.js';
import { requireAgentBinary } from '../docker/agent-helpers.js';
import { fakeLauncher } from '../helpers/firecracker-fake-vm.js';
import { startChrootGuest } from '../helpers/guest-agent.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const on = process.env.SBX_TEST_PROOT === '1' && process.getuid?.() === 0;
const why = process.env.SBX_TEST_PROOT !== '1' ? 'SBX_TEST_PROOT is not 1' : 'not root (chroot and unshare need it)';

const fixture = async () => {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-fcg-'));
  const rootfs = join(dir, 'rootfs');
  execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
  copyFileSync(requireAgentBinary(), join(rootfs, 'sbin', 'sbx-agent'));
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
      spawnProcess: fakeLauncher(startChrootGuest).launch,
    }),
    image: 'default',
    cleanup: async () => rmSync(dir, { recursive: true, force: true }),
  };
};

describe.skipIf(!on)(`firecracker provider with the real guest agent${on ? '' : ` (skipped: ${why})`}`, () => {
  runProviderContract('firecracker-guest', fixture);
  runProviderPathContract('firecracker-guest', fixture);
  runExecErrorsContract('firecracker-guest', fixture, {});
});
