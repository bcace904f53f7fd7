/**
 * scripts/make-firecracker-rootfs.sh: an ext4 image with busybox, the built guest agent and an init
 * that starts it on the provider's vsock port, checked from outside with e2fsprogs' debugfs (no
 * mount, no boot: booting needs a KVM guest, docs/providers/firecracker.md). The agent taken back
 * out of the image answers the host client.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { AGENT_VSOCK_PORT } from '../../src/adapters/providers/firecracker/agent-protocol.js';
import { requireAgentBinary } from '../docker/agent-helpers.js';
import { startGuestAgent } from '../helpers/guest-agent.js';
import { tempDir } from '../helpers/tmp.js';

const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'make-firecracker-rootfs.sh');
// Like the proot suites: busybox-static is what SBX_TEST_PROOT=1 promises; e2fsprogs comes with it on Debian.
const on = process.env.SBX_TEST_PROOT === '1';

function debugfs(image: string, request: string): string {
  const r = spawnSync('debugfs', ['-R', request, image], { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`debugfs ${request}: ${r.stderr}`);
  return r.stdout;
}

describe.skipIf(!on)(`make-firecracker-rootfs.sh${on ? '' : ' (skipped: SBX_TEST_PROOT is not 1)'}`, () => {
  let dir: string;
  let image: string;
  beforeAll(() => {
    dir = tempDir('sbx-fcrootfs-');
    image = join(dir, 'rootfs.ext4');
    execFileSync('sh', [SCRIPT, image], { stdio: 'pipe', timeout: 120_000 });
  });

  it('builds a clean ext4 image holding busybox, the agent and the init files', () => {
    expect(spawnSync('e2fsck', ['-fn', image], { encoding: 'utf8' }).status).toBe(0);
    const sbin = debugfs(image, 'ls -l /sbin');
    expect(sbin).toMatch(/\b100755\b.*\bsbx-agent\b/);
    expect(sbin).toMatch(/\b120777\b.*\binit\b/);
    expect(debugfs(image, 'stat /sbin/init')).toContain('Fast link dest: "../bin/busybox"');
    expect(debugfs(image, 'ls -l /bin')).toMatch(/\b100755\b.*\bbusybox\b/);
    expect(debugfs(image, 'stat /sbin/sbx-agent')).toMatch(/User:\s+0\s+Group:\s+0/);
    expect(debugfs(image, 'ls -l /')).toMatch(/\bworkspace\b/);
  });

  it('starts the agent from init on the provider vsock port, after rcS mounts the kernel filesystems', () => {
    const inittab = debugfs(image, 'cat /etc/inittab');
    expect(inittab).toContain('::sysinit:/etc/init.d/rcS\n');
    expect(inittab).toContain(`::respawn:/sbin/sbx-agent --vsock-guest --port ${AGENT_VSOCK_PORT}\n`);
    expect(inittab).toContain('::ctrlaltdel:/bin/reboot\n');
    expect(debugfs(image, 'ls -l /etc/init.d')).toMatch(/\b100755\b.*\brcS\b/);
    const rcs = debugfs(image, 'cat /etc/init.d/rcS');
    for (const line of ['mount -o remount,rw /', 'mount -t proc proc /proc', 'mount -t devpts devpts /dev/pts'])
      expect(rcs).toContain(line);
  });

  it('holds the built agent byte for byte, and that binary serves the host client', async () => {
    const out = join(dir, 'agent-from-image');
    debugfs(image, `dump /sbin/sbx-agent ${out}`);
    expect(readFileSync(out).equals(readFileSync(requireAgentBinary()))).toBe(true);
    execFileSync('chmod', ['0755', out]);
    const agent = await startGuestAgent(dir, out);
    try {
      await agent.client().ping();
      const events = [];
      for await (const ev of agent
        .client()
        .exec({ command: 'echo hi', args: [], mode: 'shell', env: {}, workdir: '/' }, new AbortController().signal))
        events.push(ev);
      expect(events).toEqual([
        { stream: 'stdout', data: Buffer.from('hi\n') },
        { stream: 'exit', exit_code: 0 },
      ]);
    } finally {
      await agent.stop();
    }
  });

  it('refuses a missing or dynamically linked agent, and a bad size', () => {
    const run = (env: Record<string, string>, args = [join(dir, 'x.ext4')]) =>
      spawnSync('sh', [SCRIPT, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
    const missing = run({ SBX_AGENT: join(dir, 'nope') });
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain('no agent at');
    const dynamic = run({ SBX_AGENT: process.execPath });
    expect(dynamic.status).toBe(1);
    expect(dynamic.stderr).toContain('dynamically linked');
    expect(run({}, [join(dir, 'x.ext4'), '12x']).status).toBe(2);
    // Nothing half-built is left where the image would go.
    expect(existsSync(join(dir, 'x.ext4'))).toBe(false);
    expect(existsSync(join(dir, 'x.ext4.tmp'))).toBe(false);
  });
});
