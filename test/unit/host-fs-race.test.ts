import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import { HostFs } from '../../src/adapters/providers/shared/host-fs.js';
import { SbxError } from '../../src/core/errors.js';
import type { Provider } from '../../src/core/ports/index.js';

/*
 * Issue 12, point 1: a process inside a host-backed sandbox swaps a directory (and a file) for a
 * symbolic link to a host directory while the file API works on paths below it. A child process
 * flips them as fast as it can while every file operation loops through the API; the outside
 * directory must come out exactly as it went in, and no read may return its bytes.
 */

const FLIP_MS = 3_000;
const CANARY = 'CANARY-outside-the-sandbox';
const prootEnabled = process.env.SBX_TEST_PROOT === '1';
const prootReason = 'set SBX_TEST_PROOT=1; needs proot and busybox-static';

/** The file methods under test, bound to one sandbox. */
interface FileApi {
  writeFile(path: string, content: Uint8Array, mode: number | undefined): Promise<void>;
  readFile(path: string): Promise<Uint8Array>;
  deleteFile(path: string, recursive: boolean): Promise<void>;
  moveFile(from: string, to: string): Promise<void>;
  chmod(path: string, mode: number): Promise<void>;
}

function providerApi(p: Provider, id: string): FileApi {
  return {
    writeFile: (path, content, mode) => p.writeFile(id, path, content, mode),
    readFile: (path) => p.readFile(id, path),
    deleteFile: (path, recursive) => p.deleteFile(id, path, recursive),
    moveFile: (from, to) => p.moveFile(id, from, to),
    chmod: (path, mode) => p.chmod(id, path, mode),
  };
}

/**
 * Flips `<ws>/dir` between a real directory and a link to `outside`, and `<ws>/file` between a
 * regular file and a link to the outside canary, until the deadline; prints the number of flips.
 * Whatever the API created at `dir` while it was briefly missing is cleared so the flip goes on.
 */
const FLIPPER = `
const fs = require('fs');
const [ws, outside, ms] = process.argv.slice(1);
const dir = ws + '/dir', hold = ws + '/dir.hold', file = ws + '/file', fileHold = ws + '/file.hold';
const end = Date.now() + Number(ms);
const quiet = (f) => { try { f(); } catch {} };
let flips = 0;
while (Date.now() < end) {
  quiet(() => fs.renameSync(dir, hold));
  quiet(() => fs.symlinkSync(outside, dir));
  quiet(() => fs.renameSync(file, fileHold));
  quiet(() => fs.symlinkSync(outside + '/canary', file));
  for (let i = 0; i < 20000; i++);
  quiet(() => { if (fs.lstatSync(dir).isSymbolicLink()) fs.unlinkSync(dir); });
  quiet(() => { if (fs.lstatSync(file).isSymbolicLink()) fs.unlinkSync(file); });
  try { fs.renameSync(hold, dir); } catch {
    quiet(() => { if (fs.lstatSync(dir).isDirectory()) { fs.rmSync(dir, { recursive: true, force: true }); fs.renameSync(hold, dir); } });
  }
  quiet(() => fs.renameSync(fileHold, file));
  for (let i = 0; i < 20000; i++);
  flips++;
}
process.stdout.write(String(flips));
`;

function runFlipper(ws: string, outside: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', FLIPPER, ws, outside, String(FLIP_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const limit = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the flipper did not finish in time'));
    }, FLIP_MS + 20_000);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearTimeout(limit);
      if (code === 0) resolve(Number(out));
      else reject(new Error(`the flipper exited with ${code}`));
    });
  });
}

/** Every file under `dir` with its type, mode and content: what must not change. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string, rel: string) => {
    const st = lstatSync(d);
    const mode = (st.mode & 0o7777).toString(8);
    if (st.isDirectory()) {
      out[rel || '.'] = `dir ${mode}`;
      for (const n of readdirSync(d).sort()) walk(join(d, n), rel ? `${rel}/${n}` : n);
    } else {
      out[rel] = `${st.isSymbolicLink() ? 'link' : 'file'} ${mode} ${st.isSymbolicLink() ? '' : readFileSync(d, 'utf8')}`;
    }
  };
  walk(dir, '');
  return out;
}

interface Tally {
  ok: number;
  refused: number;
  unexpected: string[];
  canaryReads: number;
}

/** Runs every file operation in a loop until `stop` resolves; any error must be a 4xx SbxError. */
async function hammer(api: FileApi, stop: Promise<unknown>): Promise<Tally> {
  const t: Tally = { ok: 0, refused: 0, unexpected: [], canaryReads: 0 };
  let done = false;
  void stop.finally(() => (done = true));
  const attempt = async (what: string, op: () => Promise<unknown>) => {
    try {
      const res = await op();
      if (res instanceof Uint8Array && Buffer.from(res).toString().includes(CANARY)) t.canaryReads++;
      t.ok++;
    } catch (err) {
      if (err instanceof SbxError && (err.code === 'bad_request' || err.code === 'not_found')) t.refused++;
      else t.unexpected.push(`${what}: ${err instanceof SbxError ? err.code : ''} ${(err as Error).message}`);
    }
  };
  const loop = async (body: (i: number) => Promise<void>) => {
    for (let i = 0; !done; i++) {
      await body(i);
      await new Promise((r) => setImmediate(r));
    }
  };
  const bytes = (s: string) => Buffer.from(s);
  await Promise.all([
    loop(async (i) => {
      await attempt('write', () => api.writeFile(`/workspace/dir/w-${i % 50}.txt`, bytes('written'), undefined));
      await attempt('overwrite file', () => api.writeFile('/workspace/file', bytes('inside'), 0o644));
    }),
    loop(async () => {
      await attempt('read', () => api.readFile('/workspace/dir/canary'));
      await attempt('read file', () => api.readFile('/workspace/file'));
    }),
    loop(async (i) => {
      await attempt('write into a new dir', () => api.writeFile(`/workspace/dir/new-${i % 50}/deeper/x.txt`, bytes('x'), 0o600));
    }),
    loop(async () => {
      await attempt('chmod', () => api.chmod('/workspace/dir/canary', 0o777));
      await attempt('chmod file', () => api.chmod('/workspace/file', 0o777));
    }),
    loop(async (i) => {
      await attempt('move source', () => api.writeFile(`/workspace/src-${i % 50}`, bytes('moved'), undefined));
      await attempt('move', () => api.moveFile(`/workspace/src-${i % 50}`, `/workspace/dir/moved-${i % 50}`));
    }),
    loop(async (i) => {
      await attempt('victim', () => api.writeFile('/workspace/dir/victim/f', bytes('mine'), undefined));
      await attempt('delete recursive', () => api.deleteFile('/workspace/dir/victim', true));
      await attempt('delete', () => api.deleteFile(`/workspace/dir/w-${i % 50}.txt`, false));
    }),
  ]);
  return t;
}

/** Sets up `<root>/workspace/{dir,file}` and an outside directory, flips, hammers, and checks the outside. */
async function raceCheck(root: string, api: FileApi): Promise<void> {
  const outside = mkdtempSync(join(tmpdir(), 'sbx-race-outside-'));
  try {
    writeFileSync(join(outside, 'canary'), CANARY);
    chmodSync(join(outside, 'canary'), 0o600);
    mkdirSync(join(outside, 'victim'));
    writeFileSync(join(outside, 'victim', 'f'), 'outside victim');
    chmodSync(outside, 0o700);
    const ws = join(root, 'workspace');
    mkdirSync(join(ws, 'dir'), { recursive: true });
    writeFileSync(join(ws, 'dir', 'canary'), 'inside');
    writeFileSync(join(ws, 'file'), 'inside');
    const before = snapshot(outside);

    const flipper = runFlipper(ws, outside);
    const [flips, tally] = await Promise.all([flipper, hammer(api, flipper)]);

    expect(tally.unexpected).toEqual([]);
    expect(snapshot(outside)).toEqual(before);
    expect(tally.canaryReads).toBe(0);
    // The race was on: the flipper ran, and the API both worked and refused along the way.
    expect(flips).toBeGreaterThan(10);
    expect(tally.ok).toBeGreaterThan(0);
    expect(tally.refused).toBeGreaterThan(0);
    // Outside the flips the API works as usual.
    await api.writeFile('/workspace/dir/after.txt', Buffer.from('after'), undefined);
    expect(Buffer.from(await api.readFile('/workspace/dir/after.txt')).toString()).toBe('after');
  } finally {
    rmSync(outside, { recursive: true, force: true });
  }
}

describe('host file API against a directory swapped for a link (issue 12.1)', () => {
  let base: string;
  beforeAll(() => {
    base = mkdtempSync(join(tmpdir(), 'sbx-race-'));
  });
  afterAll(() => rmSync(base, { recursive: true, force: true }));

  it('HostFs never writes, reads, chmods, moves into or deletes outside the root', async () => {
    const root = join(base, 'hostfs');
    mkdirSync(root);
    const fs = new HostFs(root);
    await raceCheck(root, fs);
  });

  it('the mock provider neither', async () => {
    const p = createMockProvider({ rootDir: join(base, 'mock') });
    const { runtime_id } = await p.spawn({
      sandbox_id: 'sb-race-mock',
      image: 'host',
      memory_mb: 256,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    });
    try {
      await raceCheck(join(base, 'mock', runtime_id), providerApi(p, runtime_id));
    } finally {
      await p.destroy(runtime_id);
    }
  });

  describe.skipIf(!prootEnabled)(`proot (${prootReason})`, () => {
    it('the proot provider neither', async () => {
      const rootfs = join(base, 'rootfs');
      execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
      const p = createProotProvider({ rootfs, workDir: join(base, 'proot') });
      const { runtime_id } = await p.spawn({
        sandbox_id: 'sb-race-proot',
        image: 'busybox',
        memory_mb: 256,
        vcpus: 1,
        metadata: {},
        owner_id: null,
      });
      try {
        await raceCheck(join(base, 'proot', runtime_id), providerApi(p, runtime_id));
      } finally {
        await p.destroy(runtime_id);
      }
    });
  });
});
