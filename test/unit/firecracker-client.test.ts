import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentClient } from '../../src/adapters/providers/firecracker/agent-client.js';
import { connectVsock, encodeFrame } from '../../src/adapters/providers/firecracker/agent-protocol.js';
import { FirecrackerApi, redactPaths } from '../../src/adapters/providers/firecracker/api-client.js';
import { SbxError } from '../../src/core/errors.js';
import { loadDescription, startFakeFirecrackerApi, type FakeFirecrackerApi, validate } from '../helpers/firecracker-api.js';
import { tempDir } from '../helpers/tmp.js';

const servers: FakeFirecrackerApi[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function fresh(options: { hang?: boolean } = {}) {
  const sock = join(tempDir('sbx-fc-api-'), 'api.sock');
  const fake = await startFakeFirecrackerApi(sock, {}, options);
  servers.push(fake);
  return { fake, api: new FirecrackerApi(sock, 1_000), sock };
}

async function refused(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return err as SbxError;
}

const machine = { vcpu_count: 2, mem_size_mib: 256 };
const boot = { kernel_image_path: '/k/vmlinux', boot_args: 'console=ttyS0' };
const root = { drive_id: 'rootfs', path_on_host: 'rootfs.ext4', is_root_device: true, is_read_only: false };

describe('the vendored API description', () => {
  it('loads, and its schemas judge bodies', () => {
    const d = loadDescription();
    expect(d.version).toMatch(/^1\.\d+/);
    const put = d.routes.find((r) => r.template === '/machine-config')!.ops.get('PUT')!;
    expect(put.preBootOnly).toBe(true);
    expect(validate(put.body!.schema, machine, d.definitions)).toEqual([]);
    expect(validate(put.body!.schema, { vcpu_count: 0, mem_size_mib: 1 }, d.definitions)).toEqual(['body.vcpu_count: below the minimum 1']);
    expect(d.routes.find((r) => r.template === '/snapshot/create')!.ops.get('PUT')!.postBootOnly).toBe(true);
  });
});

describe('FirecrackerApi against the validating server', () => {
  it('a cold boot in the provider order is accepted, and the VM runs', async () => {
    const { fake, api } = await fresh();
    await api.putMachineConfig(machine);
    await api.putBootSource(boot);
    await api.putDrive(root);
    await api.putNetworkInterface({ iface_id: 'eth0', host_dev_name: 'tap0', guest_mac: '06:00:ac:10:00:02' });
    await api.putVsock({ guest_cid: 3, uds_path: 'vsock.sock' });
    await api.action('InstanceStart');
    expect(fake.requests.map((r) => `${r.method} ${r.path} ${r.status}`)).toEqual([
      'PUT /machine-config 204',
      'PUT /boot-source 204',
      'PUT /drives/rootfs 204',
      'PUT /network-interfaces/eth0 204',
      'PUT /vsock 204',
      'PUT /actions 204',
    ]);
    expect(fake.requests[0]!.body).toEqual(machine);
    expect(fake.requests[5]!.body).toEqual({ action_type: 'InstanceStart' });
    expect(await api.describe()).toMatchObject({ state: 'Running' });
    // Pause, snapshot, resume; ctrl-alt-del.
    await api.setVmState('Paused');
    await api.createSnapshot({ snapshot_type: 'Full', snapshot_path: '/s/vmstate', mem_file_path: '/s/memory' });
    await api.setVmState('Resumed');
    await api.action('SendCtrlAltDel');
    expect(fake.requests.slice(7).every((r) => r.status === 204)).toBe(true);
  });

  it('a restore on a fresh process is accepted', async () => {
    const { fake, api } = await fresh();
    await api.loadSnapshot({
      snapshot_path: '/s/vmstate',
      mem_backend: { backend_type: 'File', backend_path: '/s/memory' },
      resume_vm: true,
      vsock_override: { uds_path: 'vsock.sock' },
    });
    expect(fake.state.state).toBe('Running');
  });

  it('misuse is refused with 400 {fault_message}, as a provider_error', async () => {
    const { api, fake } = await fresh();
    expect((await refused(api.action('InstanceStart'))).message).toMatch(/without kernel configuration/);
    await api.putBootSource(boot);
    expect((await refused(api.action('InstanceStart'))).message).toMatch(/root block device/);
    await api.putDrive(root);
    expect((await refused(api.action('InstanceStart'))).message).toMatch(/machine-config/);
    const missing = await refused(api.call('PUT', '/machine-config', { vcpu_count: 1 }));
    expect(missing.code).toBe('provider_error');
    expect(missing.message).toMatch(/missing required field mem_size_mib/);
    expect((await refused(api.call('PUT', '/machine-config', { vcpu_count: '2', mem_size_mib: 128 }))).message).toMatch(
      /vcpu_count: expected integer/,
    );
    expect((await refused(api.call('PUT', '/machine-config', { vcpu_count: 33, mem_size_mib: 128 }))).message).toMatch(
      /above the maximum 32/,
    );
    expect((await refused(api.call('PUT', '/machine-config', { ...machine, vcpus: 2 }))).message).toMatch(/unknown field vcpus/);
    expect((await refused(api.call('PUT', '/drives/other', root))).message).toMatch(/does not match/);
    expect((await refused(api.call('PUT', '/vsock', { guest_cid: 2, uds_path: 'v.sock' }))).message).toMatch(/below the minimum 3/);
    expect((await refused(api.call('PUT', '/actions', { action_type: 'Reboot' }))).message).toMatch(/not one of/);
    expect((await refused(api.call('PUT', '/no-such-thing', {}))).message).toMatch(/Invalid request method and\/or path/);
    expect((await refused(api.call('PATCH', '/boot-source', boot))).message).toMatch(/Invalid request method/);
    expect((await refused(api.call('PUT', '/snapshot/create', { snapshot_path: 'a', mem_file_path: 'b' }))).message).toMatch(
      /before starting/,
    );
    // Configured: a snapshot can no longer be loaded here.
    expect(
      (await refused(api.loadSnapshot({ snapshot_path: 'a', mem_backend: { backend_type: 'File', backend_path: 'b' }, resume_vm: true })))
        .message,
    ).toMatch(/not allowed after configuring/);
    await api.putMachineConfig(machine);
    await api.action('InstanceStart');
    expect((await refused(api.putBootSource(boot))).message).toMatch(/not supported after starting/);
    expect((await refused(api.action('InstanceStart'))).message).toMatch(/after starting|already running/);
    expect((await refused(api.createSnapshot({ snapshot_type: 'Full', snapshot_path: 'a', mem_file_path: 'b' }))).message).toMatch(
      /not paused/,
    );
    expect(fake.requests.filter((r) => r.status === 204).map((r) => r.path)).toEqual([
      '/boot-source',
      '/drives/rootfs',
      '/machine-config',
      '/actions',
    ]);
  });

  it('a restore body needs exactly one memory source', async () => {
    const { api } = await fresh();
    const both = { snapshot_path: 'a', mem_file_path: 'm', mem_backend: { backend_type: 'File', backend_path: 'm' } };
    expect((await refused(api.call('PUT', '/snapshot/load', both))).message).toMatch(/Exactly one/);
    expect((await refused(api.call('PUT', '/snapshot/load', { snapshot_path: 'a' }))).message).toMatch(/Exactly one/);
  });
});

describe('FirecrackerApi errors and deadlines', () => {
  it('fault messages lose host paths', async () => {
    expect(redactPaths('Cannot open /var/lib/sbx/fc/sb-1/rootfs.ext4: No such file')).toBe('Cannot open <path>: No such file');
    const sock = join(tempDir('sbx-fc-api-'), 'api.sock');
    const { createServer: http } = await import('node:http');
    const srv = http((_req, res) => {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ fault_message: 'Unable to open the kernel image "/secret/host/vmlinux"' }));
    });
    await new Promise<void>((r) => srv.listen(sock, r));
    try {
      const err = await refused(new FirecrackerApi(sock).putBootSource(boot));
      expect(err.code).toBe('provider_error');
      expect(err.message).not.toContain('/secret');
      expect(err.message).toContain('firecracker refused PUT /boot-source (HTTP 400)');
    } finally {
      srv.close();
    }
  });

  it('a server that never answers meets the deadline as a timeout', async () => {
    const { api } = await fresh({ hang: true });
    const started = Date.now();
    const err = await refused(api.call('PUT', '/machine-config', machine, { timeoutMs: 200 }));
    expect(err.code).toBe('timeout');
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('a socket that accepts and says nothing meets the deadline too; a cancel is prompt', async () => {
    const sock = join(tempDir('sbx-fc-api-'), 'api.sock');
    const held: import('node:net').Socket[] = [];
    const srv = createServer((s) => held.push(s));
    await new Promise<void>((r) => srv.listen(sock, r));
    try {
      const err = await refused(new FirecrackerApi(sock, 150).describe());
      expect(err.code).toBe('timeout');
      const ac = new AbortController();
      setTimeout(() => ac.abort(), 50);
      expect((await refused(new FirecrackerApi(sock, 10_000).describe({ signal: ac.signal }))).code).toBe('timeout');
    } finally {
      for (const s of held) s.destroy();
      srv.close();
    }
  });

  it('no socket is unavailable; a garbage answer is a provider_error', async () => {
    const dir = tempDir('sbx-fc-api-');
    expect((await refused(new FirecrackerApi(join(dir, 'none.sock')).describe())).code).toBe('unavailable');
    const sock = join(dir, 'api.sock');
    const srv = createServer((s) => s.end('HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n{{{'));
    await new Promise<void>((r) => srv.listen(sock, r));
    try {
      expect((await refused(new FirecrackerApi(sock).describe())).code).toBe('provider_error');
    } finally {
      srv.close();
    }
  });
});

describe('the guest agent connection: handshake, deadlines, garbage', () => {
  async function agentServer(onConn: (s: import('node:net').Socket) => void) {
    const sock = join(tempDir('sbx-fc-vsock-'), 'vsock.sock');
    const held: import('node:net').Socket[] = [];
    const srv = createServer((s) => {
      held.push(s);
      s.on('error', () => undefined);
      onConn(s);
    });
    await new Promise<void>((r) => srv.listen(sock, r));
    return { sock, close: () => (held.forEach((s) => s.destroy()), srv.close()) };
  }
  const client = (sock: string) =>
    new AgentClient({ connect: (signal) => connectVsock(sock, 1024, { timeoutMs: 300, signal }), timeoutMs: 300 });

  it('sends CONNECT <port>, and a refusal or silence is typed', async () => {
    const seen: string[] = [];
    const refusing = await agentServer((s) => s.once('data', (c) => (seen.push(c.toString()), s.end())));
    const silent = await agentServer(() => undefined);
    try {
      expect((await refused(client(refusing.sock).ping())).code).toBe('unavailable');
      expect(seen).toEqual(['CONNECT 1024\n']);
      expect((await refused(client(silent.sock).ping())).code).toBe('timeout');
    } finally {
      refusing.close();
      silent.close();
    }
  });

  it('an agent that goes quiet after the handshake meets the deadline; garbage frames are provider_error', async () => {
    const quiet = await agentServer((s) => s.once('data', () => s.write('OK 99\n')));
    const garbage = await agentServer((s) =>
      s.once('data', () => s.write(Buffer.concat([Buffer.from('OK 99\n'), Buffer.from([0, 0, 0, 3, 0, 0, 0, 0]), Buffer.from('{{{')]))),
    );
    const huge = await agentServer((s) =>
      s.once('data', () => s.write(Buffer.concat([Buffer.from('OK 99\n'), Buffer.from([0x7f, 0, 0, 0, 0, 0, 0, 0])]))),
    );
    const wrongAnswer = await agentServer((s) =>
      s.once('data', () => s.write(Buffer.concat([Buffer.from('OK 99\n'), encodeFrame({ type: 'ok', entries: 'nope' })]))),
    );
    try {
      const started = Date.now();
      expect((await refused(client(quiet.sock).stat('/x'))).code).toBe('timeout');
      expect(Date.now() - started).toBeLessThan(2_000);
      expect((await refused(client(garbage.sock).stat('/x'))).message).toMatch(/not JSON/);
      expect((await refused(client(huge.sock).stat('/x'))).message).toMatch(/oversized/);
      expect((await refused(client(wrongAnswer.sock).listFiles('/x'))).code).toBe('provider_error');
    } finally {
      for (const s of [quiet, garbage, huge, wrongAnswer]) s.close();
    }
  });
});
