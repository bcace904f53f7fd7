/**
 * Snapshots and volumes of the host-directory providers (DESIGN.md §10), mock always and proot
 * with SBX_TEST_PROOT=1: snapshot → spawn from it → the files are there, links copied as links
 * (never followed out of the tree); a volume written by one sandbox is read by the next.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import type { ExecSpec, Provider, SpawnSpec } from '../../src/core/ports/index.js';

const prootOn = process.env.SBX_TEST_PROOT === '1';
const script = join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh');
const enc = new TextEncoder();
const dec = new TextDecoder();

interface Fixture {
  provider: Provider;
  dataDir: string;
  /** Whether commands see the sandbox's own root (proot) or the host's (mock: relative paths only). */
  guestRoot: boolean;
}

function makeFixture(kind: 'mock' | 'proot'): Fixture & { dir: string } {
  const dir = mkdtempSync(join(tmpdir(), `sbx-snapvol-${kind}-`));
  const dataDir = join(dir, 'data');
  if (kind === 'mock')
    return { dir, dataDir, guestRoot: false, provider: createMockProvider({ rootDir: join(dir, 'sandboxes'), dataDir }) };
  const rootfs = join(dir, 'rootfs');
  execFileSync('sh', [script, rootfs], { stdio: 'pipe' });
  return { dir, dataDir, guestRoot: true, provider: createProotProvider({ rootfs, workDir: join(dir, 'sandboxes'), dataDir }) };
}

async function run(p: Provider, id: string, command: string, workdir?: string): Promise<{ out: string; code: number }> {
  const spec: ExecSpec = { command, args: [], mode: 'shell', env: {}, ...(workdir ? { workdir } : {}) };
  let out = '';
  let code = -1;
  for await (const ev of p.exec(id, spec, AbortSignal.timeout(30_000))) {
    if (ev.stream === 'exit') code = ev.exit_code;
    else if (ev.stream === 'stdout') out += dec.decode(ev.data);
  }
  return { out, code };
}

const base = (id: string, extra: Partial<SpawnSpec> = {}): SpawnSpec => ({
  sandbox_id: id,
  image: 'busybox',
  memory_mb: 64,
  vcpus: 1,
  metadata: {},
  owner_id: null,
  ...extra,
});

for (const kind of ['mock', 'proot'] as const) {
  const skip = kind === 'proot' && !prootOn;
  describe.skipIf(skip)(
    `${kind} snapshots and volumes${skip ? ' (skipped: set SBX_TEST_PROOT=1; needs proot and busybox-static)' : ''}`,
    () => {
      let fx: (Fixture & { dir: string }) | undefined;
      afterEach(() => {
        if (fx) rmSync(fx.dir, { recursive: true, force: true });
        fx = undefined;
      });

      it('snapshot → spawn from it → the files written before are there; links stay links; delete removes the tree', async () => {
        fx = makeFixture(kind);
        const p = fx.provider;
        const a = (await p.spawn(base('sb-a'))).runtime_id;
        await p.writeFile(a, '/workspace/a.txt', enc.encode('written before'), undefined);
        // A link pointing out of the sandbox: copied as a link, its target never read.
        expect((await run(p, a, 'ln -s / escape && ln -s a.txt rel', '/workspace')).code).toBe(0);
        const snap = await p.snapshot!(a, 's1');
        expect(snap.image).toBe('sbx-snapshot/s1');
        expect(snap.size_bytes).toBeGreaterThanOrEqual('written before'.length);
        const tree = join(fx.dataDir, 'snapshots', 's1');
        expect(lstatSync(join(tree, 'workspace', 'escape')).isSymbolicLink()).toBe(true);
        expect(readlinkSync(join(tree, 'workspace', 'escape'))).toBe('/');
        await expect(p.snapshot!(a, 's1')).rejects.toMatchObject({ code: 'conflict' });
        await p.writeFile(a, '/workspace/later.txt', enc.encode('after'), undefined);

        const b = (await p.spawn(base('sb-b', { snapshot: 's1', image: snap.image }))).runtime_id;
        expect(dec.decode(await p.readFile(b, '/workspace/a.txt'))).toBe('written before');
        expect(dec.decode(await p.readFile(b, '/workspace/rel'))).toBe('written before');
        await expect(p.readFile(b, '/workspace/later.txt')).rejects.toMatchObject({ code: 'not_found' });
        if (fx.guestRoot) expect((await run(p, b, 'cat /workspace/a.txt')).out).toBe('written before');

        await p.deleteSnapshot!('s1', snap.image);
        expect(existsSync(tree)).toBe(false);
        await p.deleteSnapshot!('s1', snap.image);
        await expect(p.spawn(base('sb-c', { snapshot: 's1', image: snap.image }))).rejects.toMatchObject({ code: 'provider_error' });
        await p.destroy(a);
        await p.destroy(b);
      }, 60_000);

      it('a volume written by one sandbox is read by the next; its size counts the bytes; delete removes it', async () => {
        fx = makeFixture(kind);
        const p = fx.provider;
        await p.createVolume!('v1');
        expect(await p.volumeSizes!(['v1', 'nope'])).toEqual({ v1: 0, nope: null });
        const a = (await p.spawn(base('sb-a', { volumes: [{ name: 'v1', mount_path: '/data' }] }))).runtime_id;
        expect((await run(p, a, 'echo hi > f', '/data')).code).toBe(0);
        if (fx.guestRoot) expect((await run(p, a, 'echo there > /data/g && ls /data')).out).toBe('f\ng\n');
        else await p.writeFile(a, '/data/g', enc.encode('there\n'), undefined);
        await expect(p.deleteFile(a, '/data', true)).rejects.toMatchObject({ code: 'bad_request' });
        expect((await p.listFiles(a, '/data')).map((f) => f.path)).toEqual(['/data/f', '/data/g']);
        expect(await p.glob(a, '/data/*')).toEqual(['/data/f', '/data/g']);
        await p.destroy(a);

        const b = (await p.spawn(base('sb-b', { volumes: [{ name: 'v1', mount_path: '/mnt/v' }] }))).runtime_id;
        expect(dec.decode(await p.readFile(b, '/mnt/v/f'))).toBe('hi\n');
        if (fx.guestRoot) expect((await run(p, b, 'cat /mnt/v/f /mnt/v/g')).out).toBe('hi\nthere\n');
        expect(await p.volumeSizes!(['v1'])).toEqual({ v1: 'hi\nthere\n'.length });
        await p.destroy(b);
        expect(existsSync(join(fx.dataDir, 'volumes', 'v1', 'f'))).toBe(true);
        await p.deleteVolume!('v1');
        expect(existsSync(join(fx.dataDir, 'volumes', 'v1'))).toBe(false);
        await expect(p.spawn(base('sb-c', { volumes: [{ name: 'v1', mount_path: '/data' }] }))).rejects.toMatchObject({
          code: 'provider_error',
        });
      }, 60_000);
    },
  );
}
