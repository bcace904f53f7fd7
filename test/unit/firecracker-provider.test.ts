import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createFirecrackerProvider } from '../../src/adapters/providers/firecracker/index.js';
import { SbxError } from '../../src/core/errors.js';
import type { ExecEvent, ExecSpec } from '../../src/core/ports/index.js';
import { fakeLauncher } from '../helpers/firecracker-fake-vm.js';
import { tempDir } from '../helpers/tmp.js';

const never = new AbortController().signal;

async function run(events: AsyncIterable<ExecEvent>) {
  let out = '';
  let err = '';
  let code: number | null = null;
  for await (const e of events) {
    if (e.stream === 'stdout') out += Buffer.from(e.data).toString();
    else if (e.stream === 'stderr') err += Buffer.from(e.data).toString();
    else if (e.stream === 'exit') code = e.exit_code;
  }
  return { out, err, code };
}

async function refused(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return err as SbxError;
}

const sh = (command: string, extra: Partial<ExecSpec> = {}): ExecSpec => ({ command, args: [], mode: 'shell', env: {}, ...extra });

function hostFiles() {
  const base = tempDir('sbx-fc-prov-');
  // The "root drive" is a directory here: the fake agent serves it as the guest's `/`.
  const rootfs = join(base, 'rootfs');
  mkdirSync(join(rootfs, 'workspace'), { recursive: true });
  writeFileSync(join(rootfs, 'etc-release'), 'fake guest\n');
  const kernel = join(base, 'vmlinux');
  writeFileSync(kernel, 'not really a kernel');
  return { base, rootfs, kernel, dataDir: join(base, 'data') };
}

describe('firecracker provider over the validating API server and the fake agent', () => {
  const h = hostFiles();
  const fake = fakeLauncher();
  const p = createFirecrackerProvider({
    binary: join(h.base, 'no-firecracker-here'),
    kernelPath: h.kernel,
    rootfsPath: h.rootfs,
    dataDir: h.dataDir,
    spawnProcess: fake.launch,
    timeouts: { agentReadyMs: 3_000, shutdownMs: 1_000 },
  });
  let rid: string;

  beforeAll(async () => {
    rid = (await p.spawn({ sandbox_id: 'sb-fc1', image: 'default', memory_mb: 256, vcpus: 2, metadata: {}, owner_id: null })).runtime_id;
  });
  afterAll(async () => {
    await p.close?.();
  });

  it('spawn sends the cold-boot sequence, every request accepted by the description', () => {
    const vm = fake.vms[0]!;
    expect(vm.api.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      'PUT /machine-config 204',
      'PUT /boot-source 204',
      'PUT /drives/rootfs 204',
      'PUT /vsock 204',
      'PUT /actions 204',
    ]);
    expect(vm.api.requests.map((r) => r.body)).toEqual([
      { vcpu_count: 2, mem_size_mib: 256 },
      { kernel_image_path: h.kernel, boot_args: 'console=ttyS0 reboot=k panic=1 pci=off' },
      { drive_id: 'rootfs', path_on_host: 'rootfs.ext4', is_root_device: true, is_read_only: false },
      { guest_cid: 3, uds_path: 'vsock.sock' },
      { action_type: 'InstanceStart' },
    ]);
    expect(vm.cwd).toBe(join(h.dataDir, 'sb-fc1'));
    expect(rid).toBe('sb-fc1');
  });

  it('status, listRuntimes and config (no host paths)', async () => {
    expect(await p.status(rid)).toBe('running');
    expect(await p.status('sb-nope')).toBe('missing');
    expect(await p.listRuntimes!()).toEqual([{ runtime_id: 'sb-fc1', sandbox_id: 'sb-fc1', installation_id: null, status: 'running' }]);
    expect(JSON.stringify(p.config())).not.toContain(h.base);
    expect(p.config()).toMatchObject({ runtime: 'firecracker', kernel: 'vmlinux' });
  });

  it('exec: shell and argv, env, cwd, stdin bytes and streams, stderr, exit codes', async () => {
    expect(await run(p.exec(rid, sh('echo hi; echo oops >&2; exit 3'), never))).toEqual({ out: 'hi\n', err: 'oops\n', code: 3 });
    expect((await run(p.exec(rid, { command: 'printf', args: ['%s|', 'a b', '$HOME'], mode: 'argv', env: {} }, never))).out).toBe(
      'a b|$HOME|',
    );
    expect((await run(p.exec(rid, sh('echo "$GREETING"; pwd', { env: { GREETING: 'hello' }, workdir: '/workspace' }), never))).out).toBe(
      `hello\n${join(h.dataDir, 'sb-fc1', 'rootfs.ext4', 'workspace')}\n`,
    );
    expect((await run(p.exec(rid, sh('cat', { stdin: Buffer.from('piped') }), never))).out).toBe('piped');
    async function* chunks() {
      yield Buffer.from('one ');
      await new Promise((r) => setTimeout(r, 20));
      yield Buffer.from('two');
    }
    expect((await run(p.exec(rid, sh('cat', { stdin: chunks() }), never))).out).toBe('one two');
    expect((await run(p.exec(rid, { command: 'no-such-command-xyz', args: [], mode: 'argv', env: {} }, never))).code).toBe(127);
  });

  it('exec: a cancel kills the command and ends promptly; a signal control reaches it', async () => {
    const ac = new AbortController();
    const started = Date.now();
    setTimeout(() => ac.abort(), 150);
    const res = await run(p.exec(rid, sh('sleep 30'), ac.signal));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(res.code === null || res.code !== 0).toBe(true);
    async function* controls() {
      await new Promise((r) => setTimeout(r, 150));
      yield { type: 'signal' as const, signal: 'SIGTERM' as const };
    }
    expect((await run(p.exec(rid, sh('sleep 30', { controls: controls() }), never))).code).toBe(143);
  });

  it('files: write, read, stat, list, move, chmod, glob, delete, and the refusals', async () => {
    await p.writeFile(rid, '/workspace/a.txt', Buffer.from('alpha'), 0o640);
    expect(Buffer.from(await p.readFile(rid, '/workspace/a.txt')).toString()).toBe('alpha');
    expect(await p.stat(rid, '/workspace/a.txt')).toMatchObject({
      name: 'a.txt',
      path: '/workspace/a.txt',
      size: 5,
      is_dir: false,
      mode: '0640',
    });
    const big = Buffer.alloc(5 * 1024 * 1024 + 7, 0x61);
    await p.writeFile(rid, '/workspace/big.bin', big, undefined);
    const opened = await p.openFile!(rid, '/workspace/big.bin');
    expect(opened.size).toBe(big.length);
    let n = 0;
    for await (const c of opened.body) n += c.length;
    expect(n).toBe(big.length);
    expect((await refused(p.readFile(rid, '/workspace/big.bin', undefined, 1024))).code).toBe('payload_too_large');
    expect((await refused(p.readFile(rid, '/workspace'))).code).toBe('bad_request');
    expect((await refused(p.stat(rid, '/workspace/none'))).code).toBe('not_found');
    await p.moveFile(rid, '/workspace/a.txt', '/workspace/sub/b.txt');
    await p.chmod(rid, '/workspace/sub/b.txt', 0o755);
    expect((await p.stat(rid, '/workspace/sub/b.txt')).mode).toBe('0755');
    expect((await p.listFiles(rid, '/workspace')).map((f) => f.name)).toEqual(['big.bin', 'sub']);
    expect(await p.glob(rid, '/workspace/**/*.txt')).toEqual(['/workspace/sub/b.txt']);
    expect(await p.glob(rid, '/nowhere/*')).toEqual([]);
    expect((await refused(p.deleteFile(rid, '/workspace/sub', false))).code).toBe('bad_request');
    await p.deleteFile(rid, '/workspace/sub', true);
    expect((await refused(p.stat(rid, '/workspace/sub'))).code).toBe('not_found');
    expect((await refused(p.stat('sb-nope', '/'))).code).toBe('not_found');
  });

  it('snapshot pauses, creates a Full snapshot, resumes; a spawn from it restores with snapshot/load only', async () => {
    await p.writeFile(rid, '/workspace/kept.txt', Buffer.from('before the snapshot'), undefined);
    const snap = await p.snapshot(rid, 'snap-one');
    expect(snap.image).toBe('firecracker-snapshot/snap-one');
    expect(snap.kernel).toBe('vmlinux');
    expect(snap.size_bytes).toBeGreaterThan(4096);
    const calls = fake.vms[0]!.api.requests.slice(5);
    expect(calls.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual(['PATCH /vm 204', 'PUT /snapshot/create 204', 'PATCH /vm 204']);
    expect(calls[0]!.body).toEqual({ state: 'Paused' });
    expect(calls[1]!.body).toMatchObject({ snapshot_type: 'Full' });
    expect(calls[2]!.body).toEqual({ state: 'Resumed' });
    expect(await p.status(rid)).toBe('running');
    expect((await refused(p.snapshot(rid, 'snap-one'))).code).toBe('conflict');
    expect((await refused(p.snapshot(rid, 'Bad Name'))).code).toBe('bad_request');

    const rid2 = (await p.spawn({ sandbox_id: 'sb-fc2', image: snap.image, memory_mb: 256, vcpus: 2, metadata: {}, owner_id: null }))
      .runtime_id;
    const restore = fake.vms[1]!.api.requests;
    expect(restore.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual(['PUT /snapshot/load 204']);
    expect(restore[0]!.body).toMatchObject({
      mem_backend: { backend_type: 'File' },
      resume_vm: true,
      vsock_override: { uds_path: 'vsock.sock' },
    });
    expect(Buffer.from(await p.readFile(rid2, '/workspace/kept.txt')).toString()).toBe('before the snapshot');
    // Its own disk: a write in the restored sandbox does not reach the first one.
    await p.writeFile(rid2, '/workspace/only-two.txt', Buffer.from('2'), undefined);
    expect((await refused(p.stat(rid, '/workspace/only-two.txt'))).code).toBe('not_found');
    await p.destroy(rid2);

    await p.deleteSnapshot('snap-one', snap.image);
    await p.deleteSnapshot('snap-one', snap.image);
    expect(
      (await refused(p.spawn({ sandbox_id: 'sb-fc3', image: snap.image, memory_mb: 256, vcpus: 1, metadata: {}, owner_id: null }))).code,
    ).toBe('not_found');
  });

  it('destroy asks the guest to power off (SendCtrlAltDel), the VMM exits, the directory goes; idempotent', async () => {
    const vm = fake.vms[0]!;
    await p.destroy(rid);
    expect(vm.api.requests.at(-1)).toMatchObject({ method: 'PUT', path: '/actions', body: { action_type: 'SendCtrlAltDel' }, status: 204 });
    expect(vm.vmm.alive()).toBe(false);
    expect(existsSync(join(h.dataDir, rid))).toBe(false);
    expect(await p.status(rid)).toBe('missing');
    await p.destroy(rid);
    expect((await refused(run(p.exec(rid, sh('true'), never)))).code).toBe('not_found');
  });

  it('spawn refusals leave nothing behind', async () => {
    const spec = { image: 'default', memory_mb: 256, vcpus: 1, metadata: {}, owner_id: null };
    expect((await refused(p.spawn({ ...spec, sandbox_id: 'sb-x', vcpus: 33 }))).code).toBe('bad_request');
    expect((await refused(p.spawn({ ...spec, sandbox_id: '../x' }))).code).toBe('bad_request');
    expect((await refused(p.spawn({ ...spec, sandbox_id: 'sb-x', network: 'bridge' }))).code).toBe('not_implemented');
    expect(existsSync(join(h.dataDir, 'sb-x'))).toBe(false);
  });
});

describe('firecracker provider failures', () => {
  it('a guest whose agent never answers: spawn times out, the VMM is stopped, the directory removed', async () => {
    const h = hostFiles();
    const fake = fakeLauncher();
    // No agent: the vsock socket is never there.
    const p = createFirecrackerProvider({
      binary: 'x',
      kernelPath: h.kernel,
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
      spawnProcess: fake.launch,
      vsockConnect: async () => {
        throw new SbxError('unavailable', 'no agent');
      },
      timeouts: { agentReadyMs: 300, shutdownMs: 200 },
    });
    const err = await refused(p.spawn({ sandbox_id: 'sb-slow', image: 'default', memory_mb: 128, vcpus: 1, metadata: {}, owner_id: null }));
    expect(err.code).toBe('timeout');
    expect(fake.vms[0]!.vmm.alive()).toBe(false);
    expect(existsSync(join(h.dataDir, 'sb-slow'))).toBe(false);
  });

  it('a network interface is configured only when one is', async () => {
    const h = hostFiles();
    const fake = fakeLauncher();
    const p = createFirecrackerProvider({
      binary: 'x',
      kernelPath: h.kernel,
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
      spawnProcess: fake.launch,
      network: { tapName: (id) => `tap-${id.slice(-4)}`, guestMac: () => '06:00:ac:10:00:02' },
    });
    await p.spawn({ sandbox_id: 'sb-net1', image: 'default', memory_mb: 128, vcpus: 1, metadata: {}, owner_id: null });
    const reqs = fake.vms[0]!.api.requests;
    expect(reqs.map((r) => r.path)).toEqual([
      '/machine-config',
      '/boot-source',
      '/drives/rootfs',
      '/network-interfaces/eth0',
      '/vsock',
      '/actions',
    ]);
    expect(reqs[3]!.body).toEqual({ iface_id: 'eth0', host_dev_name: 'tap-net1', guest_mac: '06:00:ac:10:00:02' });
    await p.spawn({ sandbox_id: 'sb-net2', image: 'default', memory_mb: 128, vcpus: 1, metadata: {}, owner_id: null, network: 'none' });
    expect(fake.vms[1]!.api.requests.map((r) => r.path)).not.toContain('/network-interfaces/eth0');
    await p.close?.();
  });
});

describe('firecracker health', () => {
  it('on this machine: unhealthy, naming what is missing', async () => {
    const h = hostFiles();
    const p = createFirecrackerProvider({
      binary: '/nonexistent/firecracker',
      kernelPath: join(h.base, 'missing-kernel'),
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
      kvmPath: join(h.base, 'no-kvm'),
    });
    const health = await p.health();
    expect(health.healthy).toBe(false);
    expect(health.error).toContain('no-kvm does not exist');
    expect(health.error).toContain('the firecracker binary is not there');
    expect(health.error).toContain('the guest kernel is not there');
    expect(health.error).not.toContain('root filesystem');
    // The real defaults: this host has no firecracker binary.
    const real = await createFirecrackerProvider({
      binary: '/usr/local/bin/firecracker',
      kernelPath: h.kernel,
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
    }).health();
    if (!existsSync('/usr/local/bin/firecracker')) {
      expect(real.healthy).toBe(false);
      expect(real.error).toContain('firecracker binary');
    }
  });

  it('healthy when each check passes', async () => {
    const h = hostFiles();
    const bin = join(h.base, 'firecracker');
    writeFileSync(bin, '#!/bin/sh\n');
    chmodSync(bin, 0o755);
    const kvm = join(h.base, 'kvm');
    writeFileSync(kvm, '');
    const health = await createFirecrackerProvider({
      binary: bin,
      kernelPath: h.kernel,
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
      kvmPath: kvm,
    }).health();
    expect(health).toMatchObject({ healthy: true, runtime_count: 0 });
    chmodSync(bin, 0o644);
    const notExec = await createFirecrackerProvider({
      binary: bin,
      kernelPath: h.kernel,
      rootfsPath: h.rootfs,
      dataDir: h.dataDir,
      kvmPath: kvm,
    }).health();
    expect(notExec.error).toContain('not executable');
  });
});
