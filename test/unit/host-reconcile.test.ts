import { execFileSync, spawn as spawnChild } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import { markerDir } from '../../src/adapters/providers/shared/host-markers.js';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { Provider, Store } from '../../src/core/ports/index.js';
import { reconcileSandboxes } from '../../src/core/sandboxes/reconcile.js';
import { within } from '../contract/provider-contract-helpers.js';

/**
 * Issue 12 point 4: host-backed runtimes (mock, proot) carry this installation's id, and their
 * exec process trees are recorded outside the sandbox roots, so that after a crash of the server
 * (here: a provider instance dropped while a `sleep` exec runs) a new provider plus startup
 * reconciliation kills the process trees and removes the directories; destroy after a restart
 * kills leftover trees too. A forged marker never makes sbx kill another process.
 */
const prootEnabled = process.env.SBX_TEST_PROOT === '1';
const script = join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh');
const clock = { now: () => new Date() };

type Make = (workDir: string, installationId: string) => Provider;

function hostPidsRunning(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      try {
        const stat = readFileSync(`/proc/${n}/stat`, 'utf8');
        return readFileSync(`/proc/${n}/cmdline`, 'utf8') === want && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function waitFor(what: string, cond: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function suite(name: string, make: Make): void {
  describe(`host reconciliation: ${name}`, () => {
    let dir: string;
    let workDir: string;
    let store: Store;
    const inst = `inst-${randomBytes(4).toString('hex')}`;
    const leftovers: number[] = [];

    beforeAll(async () => {
      dir = mkdtempSync(join(tmpdir(), `sbx-hrec-${name}-`));
      workDir = join(dir, 'sandboxes');
      store = await createSqliteStore({ path: join(dir, 'sbx.db') });
      await store.migrate();
    });
    afterAll(async () => {
      for (const pid of leftovers) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      await store?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const spawnIn = async (p: Provider) =>
      (
        await p.spawn({
          sandbox_id: `sb-hr${randomBytes(4).toString('hex')}`,
          image: 'any',
          memory_mb: 64,
          vcpus: 1,
          metadata: {},
          owner_id: null,
        })
      ).runtime_id;

    /** Starts `sleep N & exec sleep M` in the runtime and leaves the exec running (never consumed again). */
    async function startSleeper(p: Provider, rid: string): Promise<string[][]> {
      const n = 700 + Math.floor(Math.random() * 99);
      const bg = ['sleep', String(n)];
      const fg = ['sleep', String(n + 100)];
      const iter = p
        .exec(
          rid,
          { command: `${bg.join(' ')} & echo ready; exec ${fg.join(' ')}`, args: [], mode: 'shell', env: {}, workdir: '/workspace' },
          new AbortController().signal,
        )
        [Symbol.asyncIterator]();
      expect((await within(iter.next(), 10_000, 'sleeper ready')).value).toMatchObject({ stream: 'stdout' });
      await waitFor('both sleeps running', () => hostPidsRunning(bg).length === 1 && hostPidsRunning(fg).length === 1);
      leftovers.push(...hostPidsRunning(bg), ...hostPidsRunning(fg));
      return [bg, fg];
    }

    it('lists runtimes with the installation id; after a crash, reconciliation kills the exec trees and removes the dirs', async () => {
      const before = make(workDir, inst);
      const orphan = await spawnIn(before);
      const kept = await spawnIn(before);
      expect((await before.listRuntimes!()).filter((r) => r.runtime_id === orphan)).toEqual([
        { runtime_id: orphan, sandbox_id: orphan, installation_id: inst, status: 'running' },
      ]);

      // Another installation's runtime and an unlabelled directory: never touched.
      const foreign = await spawnIn(make(workDir, 'inst-other'));
      mkdirSync(join(workDir, 'sb-unlabelled'));

      const orphanProcs = await startSleeper(before, orphan);
      const keptProcs = await startSleeper(before, kept);
      // The "crash": `before` is dropped with both execs running. A live record owns `kept`.
      const at = new Date().toISOString();
      await store.insertSandbox({
        id: kept,
        state: 'running',
        provider: name,
        image: 'any',
        memory_mb: 64,
        vcpus: 1,
        created_at: at,
        updated_at: at,
        expires_at: new Date(Date.now() + 3_600_000).toISOString(),
        metadata: {},
        owner_id: null,
        worker_id: 'local',
        runtime_id: kept,
        template: null,
      });

      const after = make(workDir, inst);
      const listed = await after.listRuntimes!();
      expect(listed.find((r) => r.runtime_id === foreign)?.installation_id).toBe('inst-other');
      expect(listed.find((r) => r.runtime_id === 'sb-unlabelled')?.installation_id).toBeNull();

      const report = await reconcileSandboxes({
        store,
        providers: new Map([[name, after]]),
        bus: new EventBus(clock),
        clock,
        installationId: inst,
        workerId: 'local',
      });
      expect(report.actions).toEqual([{ action: 'remove_orphan', sandbox_id: orphan, runtime_id: orphan, provider: name }]);
      for (const argv of orphanProcs) await waitFor(`${argv.join(' ')} killed`, () => hostPidsRunning(argv).length === 0);
      expect(existsSync(join(workDir, orphan))).toBe(false);
      expect(await after.status(orphan)).toBe('missing');

      // The owned sandbox, the foreign and the unlabelled ones are untouched, their processes too.
      for (const argv of keptProcs) expect(hostPidsRunning(argv)).toHaveLength(1);
      expect(await after.status(kept)).toBe('running');
      expect(existsSync(join(workDir, foreign))).toBe(true);
      expect(existsSync(join(workDir, 'sb-unlabelled'))).toBe(true);

      // Destroy after the restart kills the tree the previous instance left running.
      await after.destroy(kept);
      for (const argv of keptProcs) await waitFor(`${argv.join(' ')} killed`, () => hostPidsRunning(argv).length === 0);
      expect(existsSync(join(workDir, kept))).toBe(false);
      await after.destroy(foreign);
    });

    it('an exec racing destroy fails with not_found, never another error', async () => {
      const p = make(workDir, inst);
      const codes = new Set<string>();
      for (let i = 0; i < 8; i++) {
        const rid = await spawnIn(p);
        const exec = (async () => {
          for await (const _ev of p.exec(
            rid,
            { command: 'true', args: [], mode: 'shell', env: {}, workdir: '/workspace' },
            new AbortController().signal,
          )) {
            // drain
          }
        })().then(
          () => 'ran',
          (err: unknown) => (err as { code?: string }).code ?? String(err),
        );
        // Let the exec get past its first checks on some rounds, not on others.
        await new Promise((r) => setTimeout(r, i % 4));
        const [outcome] = await Promise.all([within(exec, 10_000, 'exec racing destroy'), p.destroy(rid)]);
        codes.add(outcome);
      }
      expect([...codes].filter((c) => c !== 'ran' && c !== 'not_found')).toEqual([]);
    });

    it('a forged exec marker never makes destroy kill another process', async () => {
      const p = make(workDir, inst);
      const rid = await spawnIn(p);
      const bystander = spawnChild('sleep', ['600'], { detached: true, stdio: 'ignore' });
      const pid = bystander.pid!;
      leftovers.push(pid);
      const exited = new Promise((r) => bystander.once('exit', r));
      try {
        const procs = join(markerDir(workDir), 'procs', rid);
        mkdirSync(procs, { recursive: true });
        // Right pid, wrong start time; the test process itself; a pid of 1.
        writeFileSync(join(procs, 'a.json'), JSON.stringify({ pid, start: '1' }));
        writeFileSync(join(procs, 'b.json'), JSON.stringify({ pid: process.pid, start: '1' }));
        writeFileSync(join(procs, 'c.json'), JSON.stringify({ pid: 1, start: '0' }));
        writeFileSync(join(procs, 'd.json'), 'not json');
        await p.destroy(rid);
        expect(existsSync(join(workDir, rid))).toBe(false);
        expect(existsSync(procs)).toBe(false);
        expect(bystander.exitCode).toBeNull();
        expect(() => process.kill(pid, 0)).not.toThrow();
      } finally {
        bystander.kill('SIGKILL');
        await within(exited, 5_000, 'bystander exit');
      }
    });
  });
}

suite('mock', (workDir, installationId) => createMockProvider({ rootDir: workDir, installationId }));

describe.skipIf(!prootEnabled)('proot (set SBX_TEST_PROOT=1; needs proot and busybox-static)', () => {
  let rootfsDir: string;
  beforeAll(() => {
    rootfsDir = mkdtempSync(join(tmpdir(), 'sbx-hrec-rootfs-'));
    execFileSync('sh', [script, join(rootfsDir, 'rootfs')], { stdio: 'pipe' });
  });
  afterAll(() => {
    if (rootfsDir) rmSync(rootfsDir, { recursive: true, force: true });
  });
  suite('proot', (workDir, installationId) => createProotProvider({ rootfs: join(rootfsDir, 'rootfs'), workDir, installationId }));
});
