import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL_INSTALLATION, LABEL_OWNER, LABEL_SANDBOX } from '../../src/adapters/providers/docker/index.js';
import type { PullEvent } from '../../src/adapters/providers/docker/index.js';
import { SbxError } from '../../src/core/errors.js';
import type { ExecEvent, ExecSpec, Provider } from '../../src/core/ports/index.js';
import {
  DOCKER_SKIP,
  dockerTitle,
  removeInstallation,
  requireEngine,
  SOCKET,
  TEST_IMAGE,
  testInstallationId,
  testProvider,
} from './engine.js';

const never = new AbortController().signal;
const sh = (command: string, extra: Partial<ExecSpec> = {}): ExecSpec => ({ command, args: [], mode: 'shell', env: {}, ...extra });
const newId = () => `sb-sec${randomBytes(5).toString('hex')}`;

async function run(
  p: Provider,
  rid: string,
  spec: ExecSpec,
  signal = never,
): Promise<{ stdout: string; stderr: string; exit: number | null }> {
  let stdout = '';
  let stderr = '';
  let exit: number | null = null;
  for await (const ev of p.exec(rid, spec, signal)) {
    if (ev.stream === 'exit') exit = ev.exit_code;
    else if (ev.stream === 'stdout') stdout += Buffer.from(ev.data).toString();
    else stderr += Buffer.from(ev.data).toString();
  }
  return { stdout, stderr, exit };
}

async function failure(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => new Error('expected an SbxError, but it succeeded'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return err as SbxError;
}

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider: hardening, limits, failure modes'), () => {
  let docker: Docker;
  const installationId = testInstallationId();
  const pulls: PullEvent[] = [];
  let p: Provider;
  let sandboxId: string;
  let rid: string;

  beforeAll(async () => {
    docker = await requireEngine();
    p = testProvider(installationId, { onPull: (e) => pulls.push(e) });
    sandboxId = newId();
    ({ runtime_id: rid } = await p.spawn({
      sandbox_id: sandboxId,
      image: TEST_IMAGE,
      memory_mb: 128,
      vcpus: 1,
      metadata: {},
      owner_id: 'alice',
    }));
  });
  afterAll(async () => {
    await removeInstallation(docker, installationId);
  });

  it('creates a hardened, limited, labelled container', async () => {
    const info = await docker.getContainer(rid).inspect();
    expect(info.Name).toBe(`/sbx-${sandboxId}`);
    const hc = info.HostConfig;
    expect(hc.CapDrop).toEqual(['ALL']);
    expect(hc.CapAdd ?? []).toEqual([]);
    expect(hc.SecurityOpt).toContain('no-new-privileges');
    expect(hc.Memory).toBe(128 * 1024 * 1024);
    expect(hc.MemorySwap).toBe(128 * 1024 * 1024);
    expect(hc.NanoCpus).toBe(1e9);
    expect(hc.PidsLimit).toBe(256);
    expect(hc.Init).toBe(true);
    expect(hc.NetworkMode).toBe('bridge');
    expect(hc.ReadonlyRootfs).toBe(false);
    expect(info.Config.WorkingDir).toBe('/workspace');
    expect(info.Config.Labels).toMatchObject({ [LABEL_SANDBOX]: sandboxId, [LABEL_INSTALLATION]: installationId, [LABEL_OWNER]: 'alice' });
    // The capability sets of the running command are empty.
    const caps = await run(p, rid, sh('grep -E "^Cap(Eff|Prm)" /proc/self/status'));
    expect(caps.stdout).toMatch(/CapPrm:\s+0+\n/);
    expect(caps.stdout).toMatch(/CapEff:\s+0+\n/);
    expect((await run(p, rid, sh('grep NoNewPrivs /proc/self/status'))).stdout).toMatch(/NoNewPrivs:\s+1/);
  });

  it('reports health, config and the inventory with labels', async () => {
    const h = await p.health();
    expect(h).toMatchObject({ healthy: true, runtime_count: 1 });
    expect(p.config()).toEqual({
      endpoint: `unix://${SOCKET}`,
      runtime: 'runc',
      network_mode: 'bridge',
      pids_limit: 256,
      read_only_rootfs: false,
      agent: expect.stringMatching(/^(on|off)$/),
      filtered: expect.any(String),
    });
    expect(p.capabilities).toEqual(expect.arrayContaining(['runtime_inventory', 'container']));
    const rt = (await p.listRuntimes!()).find((r) => r.runtime_id === rid);
    expect(rt).toEqual({ runtime_id: rid, sandbox_id: sandboxId, installation_id: installationId, status: 'running' });
  });

  it('aborting an exec kills its process tree inside the container', async () => {
    const procs = async () =>
      (await run(p, rid, sh('ps -o args'))).stdout
        .split('\n')
        .filter((l) => l && !/^(COMMAND|\{?ps\b|ps -o args|\/bin\/sh -c ps -o args)/.test(l))
        .sort();
    const baseline = await procs();
    const ac = new AbortController();
    const iter = p.exec(rid, sh('echo started; (sleep 100 &) ; sleep 100 & sleep 100'), ac.signal)[Symbol.asyncIterator]();
    expect((await iter.next()).value).toMatchObject({ stream: 'stdout' });
    expect((await run(p, rid, sh('ps'))).stdout).toMatch(/sleep 100/);
    const t0 = Date.now();
    ac.abort(new Error('deadline'));
    while (!(await iter.next()).done) {
      // drain whatever was in flight
    }
    expect(Date.now() - t0).toBeLessThan(3_000);
    const ps = await run(p, rid, sh('ps'));
    expect(ps.exit).toBe(0);
    expect(ps.stdout).not.toMatch(/sleep 100/);
    // Nothing of the aborted command is left, not even the daemonized `(sleep 100 &)`.
    expect(await procs()).toEqual(baseline);
  });

  it('rejects sizes the host cannot give', async () => {
    const spawn = (memory_mb: number, vcpus = 1) =>
      p.spawn({ sandbox_id: newId(), image: TEST_IMAGE, memory_mb, vcpus, metadata: {}, owner_id: null });
    expect((await failure(spawn(0))).code).toBe('bad_request');
    expect((await failure(spawn(-5))).code).toBe('bad_request');
    expect((await failure(spawn(64 * 1024 * 1024))).code).toBe('bad_request');
    expect((await failure(spawn(64, 4096))).code).toBe('bad_request');
  });

  it('an image that cannot be pulled is a quick provider_error naming the image', async () => {
    const image = `sbx-test/no-such-image-${randomBytes(4).toString('hex')}:latest`;
    const t0 = Date.now();
    const err = await failure(p.spawn({ sandbox_id: newId(), image, memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null }));
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(err.code).toBe('provider_error');
    expect(err.message).toContain(image);
    expect(pulls.filter((e) => e.image === image).map((e) => e.status)).toEqual(['pulling', 'failed']);
    expect(await p.health()).toMatchObject({ runtime_count: 1 });
  });

  it('streams 100 MB of stdout with bounded memory, even with a slow consumer', async () => {
    const total = 100 * 1024 * 1024;
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    let bytes = 0;
    let chunks = 0;
    let paused = false;
    let blockedWriter = false;
    for await (const ev of p.exec(
      rid,
      sh(`yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c ${total}`),
      never,
    ) as AsyncIterable<ExecEvent>) {
      if (ev.stream === 'stdout') {
        bytes += ev.data.byteLength;
        chunks++;
        if (!paused && bytes > total / 2) {
          // Stop pulling for a while: the engine must wait for us, not pile output up in memory.
          paused = true;
          await new Promise((r) => setTimeout(r, 1_500));
          // Backpressure reached the sandbox: the writer is still there, blocked, half its output unsent.
          const top = await docker.getContainer(rid).top();
          blockedWriter = top.Processes.some((row: string[]) => row.join(' ').includes('head -c'));
        }
        if (chunks % 64 === 0) peak = Math.max(peak, process.memoryUsage().rss);
      } else if (ev.stream === 'exit') {
        expect(ev.exit_code).toBe(0);
      }
    }
    expect(bytes).toBe(total);
    expect(chunks).toBeGreaterThan(10);
    expect(blockedWriter).toBe(true);
    // RSS also counts garbage not yet collected; holding the whole output would be well past this.
    expect(peak - before).toBeLessThan(96 * 1024 * 1024);
  }, 60_000);

  it('a container killed from outside fails the next operations with an SbxError, not a hang', async () => {
    const { runtime_id } = await p.spawn({ sandbox_id: newId(), image: TEST_IMAGE, memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null });
    await docker.getContainer(runtime_id).kill();
    const t0 = Date.now();
    const err = await failure(run(p, runtime_id, sh('echo hi')));
    expect(['provider_error', 'not_found', 'unavailable']).toContain(err.code);
    expect((await failure(p.listFiles(runtime_id, '/workspace'))).code).toBe('provider_error');
    // The archive API still reads a stopped container's files: nothing is lost before destroy.
    expect((await p.stat(runtime_id, '/workspace')).is_dir).toBe(true);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(await p.status(runtime_id)).toBe('stopped');
    await p.destroy(runtime_id);
    expect(await p.status(runtime_id)).toBe('missing');
  });

  it('server settings the engine refuses are provider_errors naming the setting, and leave nothing behind', async () => {
    const before = (await p.listRuntimes!()).length;
    const spawnWith = (extra: Parameters<typeof testProvider>[1]) =>
      failure(
        testProvider(installationId, extra).spawn({
          sandbox_id: newId(),
          image: TEST_IMAGE,
          memory_mb: 64,
          vcpus: 1,
          metadata: {},
          owner_id: null,
        }),
      );
    const runtime = await spawnWith({ runtime: 'sbx-no-such-runtime' });
    expect({ code: runtime.code, message: runtime.message }).toEqual({
      code: 'provider_error',
      message: `spawn ${TEST_IMAGE}: the docker engine has no runtime "sbx-no-such-runtime" (providers.docker.runtime)`,
    });
    const network = await spawnWith({ networkMode: 'sbx-no-such-network' });
    expect({ code: network.code, message: network.message }).toEqual({
      code: 'provider_error',
      message: `spawn ${TEST_IMAGE}: network "sbx-no-such-network" (providers.docker.network_mode) does not exist on the docker engine`,
    });
    expect((await p.listRuntimes!()).length).toBe(before);
  });

  it("an invalid image reference is the caller's bad_request, before anything is pulled", async () => {
    for (const image of ['UPPER/Bad::x', 'sbx-test/busybox:bad tag']) {
      const err = await failure(p.spawn({ sandbox_id: newId(), image, memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null }));
      expect({ code: err.code, message: err.message }).toEqual({
        code: 'bad_request',
        message: `invalid image reference ${JSON.stringify(image)}: expected [registry/]name[:tag][@digest] with a lowercase name`,
      });
    }
    expect(pulls.filter((e) => e.image === 'UPPER/Bad::x')).toEqual([]);
  });

  it('a user name is refused when the provider is built: ids must be numeric', () => {
    expect(() => testProvider(installationId, { user: 'nobody' })).toThrow('docker provider: user must be a numeric uid or uid:gid');
  });

  it('a non-root user owns /workspace and what the API writes; commands can write there', async () => {
    const u = testProvider(installationId, { user: '65534' });
    const { runtime_id } = await u.spawn({ sandbox_id: newId(), image: TEST_IMAGE, memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null });
    expect((await docker.getContainer(runtime_id).inspect()).Config.User).toBe('65534');
    await u.writeFile(runtime_id, '/workspace/d/e.txt', Buffer.from('by api'), undefined);
    await u.writeFile(runtime_id, '/workspace/top.txt', Buffer.from('top'), 0o600);
    const r = await run(
      u,
      runtime_id,
      sh(
        'id -u; pwd; touch /workspace/x && echo touched >> /workspace/d/e.txt; stat -c "%n %u:%g %a" ' +
          '/workspace /workspace/d /workspace/d/e.txt /workspace/top.txt /workspace/x',
      ),
    );
    expect(r.stderr).toBe('');
    // The image names 65534 with group 65534: commands get it; the API, told only the uid, writes group 0.
    expect(r.stdout).toBe(
      [
        '65534',
        '/workspace',
        '/workspace 65534:0 755',
        '/workspace/d 65534:65534 755',
        '/workspace/d/e.txt 65534:0 644',
        '/workspace/top.txt 65534:0 600',
        '/workspace/x 65534:65534 644',
        '',
      ].join('\n'),
    );
    expect(Buffer.from(await u.readFile(runtime_id, '/workspace/d/e.txt')).toString()).toBe('by apitouched\n');
    expect((await u.listFiles(runtime_id, '/workspace')).map((f) => f.name)).toEqual(['d', 'top.txt', 'x']);
    await u.destroy(runtime_id);
  });

  it('a non-root user with a read-only rootfs: the /workspace tmpfs is theirs', async () => {
    const u = testProvider(installationId, { user: '1234:4321', readOnlyRootfs: true });
    const { runtime_id } = await u.spawn({ sandbox_id: newId(), image: TEST_IMAGE, memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null });
    expect((await docker.getContainer(runtime_id).inspect()).HostConfig.Tmpfs?.['/workspace']).toBe(
      'rw,nosuid,nodev,exec,mode=0755,uid=1234,gid=4321',
    );
    await u.writeFile(runtime_id, '/workspace/d/e.txt', Buffer.from('by api'), undefined);
    const r = await run(u, runtime_id, sh('id; pwd; touch /workspace/x; stat -c "%n %u:%g %a" /workspace /workspace/d/e.txt /workspace/x'));
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(
      [
        'uid=1234 gid=4321 groups=4321',
        '/workspace',
        '/workspace 1234:4321 755',
        '/workspace/d/e.txt 1234:4321 644',
        '/workspace/x 1234:4321 644',
        '',
      ].join('\n'),
    );
    expect((await u.listFiles(runtime_id, '/workspace')).map((f) => f.name)).toEqual(['d', 'x']);
    // Reads through exec keep the limit too, before a byte is sent.
    expect((await failure(u.readFile(runtime_id, '/workspace/d/e.txt', undefined, 3))).message).toBe('file is 6 bytes; the limit is 3');
    await u.destroy(runtime_id);
  });

  it('read-only rootfs: tmpfs /tmp and /workspace, files still work, no-network mode', async () => {
    const ro = testProvider(installationId, { readOnlyRootfs: true, networkMode: 'none', pidsLimit: 64 });
    const { runtime_id } = await ro.spawn({
      sandbox_id: newId(),
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    });
    const info = await docker.getContainer(runtime_id).inspect();
    expect(info.HostConfig.ReadonlyRootfs).toBe(true);
    expect(Object.keys(info.HostConfig.Tmpfs ?? {}).sort()).toEqual(['/tmp', '/workspace']);
    expect(info.HostConfig.NetworkMode).toBe('none');
    expect(info.HostConfig.PidsLimit).toBe(64);
    expect(ro.config()).toMatchObject({ network_mode: 'none', pids_limit: 64, read_only_rootfs: true });

    const bin = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await ro.writeFile(runtime_id, '/workspace/deep/bin.dat', bin, 0o600);
    expect(Buffer.from(await ro.readFile(runtime_id, '/workspace/deep/bin.dat')).equals(bin)).toBe(true);
    expect(await ro.stat(runtime_id, '/workspace/deep/bin.dat')).toMatchObject({ size: 256, mode: '0600', is_dir: false });
    await ro.writeFile(runtime_id, '/workspace/deep/bin.dat', Buffer.from('x'), undefined);
    expect((await ro.stat(runtime_id, '/workspace/deep/bin.dat')).mode).toBe('0600');
    expect((await run(ro, runtime_id, sh('cat /workspace/deep/bin.dat; touch /etc/nope'))).exit).not.toBe(0);
    expect((await failure(ro.writeFile(runtime_id, '/etc/nope', Buffer.from('x'), undefined))).code).toBe('bad_request');
    expect((await run(ro, runtime_id, sh('ls /sys/class/net'))).stdout.trim()).toBe('lo');
    await ro.destroy(runtime_id);
  });
});
