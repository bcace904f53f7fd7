/**
 * The provider contract against a real Firecracker: only with SBX_TEST_FIRECRACKER=1 on a host
 * that can boot guests (KVM), with the binary, an uncompressed guest kernel and a root drive image
 * whose init starts the guest agent on vsock port 1024 (docs/providers/firecracker.md; build one with
 * `scripts/make-firecracker-rootfs.sh`). Not run on the project's CI machines: they cannot boot
 * guests and have no Firecracker binary.
 *
 *   SBX_TEST_FIRECRACKER=1 SBX_FC_BINARY=/usr/local/bin/firecracker \
 * SBX_FC_KERNEL=/var/lib/sbx/vmlinux SBX_FC_ROOTFS=/var/lib/sbx/rootfs.ext4 npx vitest run test/contract/provider-firecracker-live.test.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createFirecrackerProvider } from '../../src/adapters/providers/firecracker/index.js';
import { runProviderContract } from './provider.contract.js';
import { runProviderPathContract } from './provider-paths.contract.js';
import { runExecErrorsContract } from './provider-exec-errors.contract.js';

const enabled = process.env.SBX_TEST_FIRECRACKER === '1';
const reason = 'set SBX_TEST_FIRECRACKER=1 with KVM, SBX_FC_BINARY, SBX_FC_KERNEL and SBX_FC_ROOTFS (a rootfs with the guest agent)';
if (!enabled) console.info(`skipping the live firecracker provider contract: ${reason}`);

const options = (dataDir: string) => ({
  binary: process.env.SBX_FC_BINARY ?? '/usr/local/bin/firecracker',
  kernelPath: process.env.SBX_FC_KERNEL ?? '',
  rootfsPath: process.env.SBX_FC_ROOTFS ?? '',
  // Short: unix socket paths are limited to 107 bytes.
  dataDir,
});

describe.skipIf(!enabled)(`firecracker provider, live (${reason})`, () => {
  const fixture = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-fc-'));
    return {
      provider: createFirecrackerProvider(options(dir)),
      image: 'default',
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  };

  it('the host is healthy for firecracker', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-fc-'));
    try {
      const health = await createFirecrackerProvider(options(dir)).health();
      expect(health.error).toBeUndefined();
      expect(health.healthy).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('snapshot and a spawn from it keep the files written before', async () => {
    const { provider, cleanup } = await fixture();
    try {
      await provider.spawn({ sandbox_id: 'sb-live1', image: 'default', memory_mb: 256, vcpus: 1, metadata: {}, owner_id: null });
      await provider.writeFile('sb-live1', '/tmp/kept.txt', Buffer.from('kept'), undefined);
      const snap = await provider.snapshot('sb-live1', 'live-snap');
      expect(snap.kernel).toBeTruthy();
      await provider.spawn({ sandbox_id: 'sb-live2', image: snap.image, memory_mb: 256, vcpus: 1, metadata: {}, owner_id: null });
      expect(Buffer.from(await provider.readFile('sb-live2', '/tmp/kept.txt')).toString()).toBe('kept');
      await provider.destroy('sb-live2');
      await provider.destroy('sb-live1');
      await provider.deleteSnapshot('live-snap', snap.image);
    } finally {
      await provider.close?.();
      await cleanup();
    }
  }, 120_000);

  runProviderContract('firecracker', fixture);
  runProviderPathContract('firecracker', fixture);
  runExecErrorsContract('firecracker', fixture, { exactShell: false });
});
