import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMockProvider } from '../../src/adapters/providers/mock/index.js';
import { createProotProvider } from '../../src/adapters/providers/proot/index.js';
import { probeIsolation } from '../../src/adapters/providers/shared/isolation.js';
import type { ExecEvent, ExecSpec, Provider } from '../../src/core/ports/index.js';
import { collect, never, within } from '../contract/provider-contract-helpers.js';

/**
 * Issue 12 point 2: a mock or proot sandbox has its own PID namespace (one per sandbox, which its
 * execs share). A command cannot see the server's process (here: the test process) in /proc, read
 * its environment or the environment of another sandbox's exec, nor signal them.
 */
const prootEnabled = process.env.SBX_TEST_PROOT === '1';
const script = join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh');

interface Fixture {
  provider: Provider;
  cleanup: () => void;
}

function mockFixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-iso-mock-'));
  return {
    provider: createMockProvider({ rootDir: join(dir, 'sandboxes') }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

function prootFixture(): Fixture {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-iso-proot-'));
  const rootfs = join(dir, 'rootfs');
  execFileSync('sh', [script, rootfs], { stdio: 'pipe' });
  return {
    provider: createProotProvider({ rootfs, workDir: join(dir, 'sandboxes') }),
    cleanup: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** Host pids whose command line is exactly `argv`. */
function hostPidsRunning(argv: string[]): number[] {
  const want = `${argv.join('\0')}\0`;
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n))
    .filter((n) => {
      try {
        return readFileSync(`/proc/${n}/cmdline`, 'utf8') === want;
      } catch {
        return false;
      }
    })
    .map(Number);
}

function suite(name: string, make: () => Fixture): void {
  describe(`host isolation: ${name}`, () => {
    let fx: Fixture;
    let p: Provider;
    let a: string;
    let b: string;
    const sh = (command: string, env: Record<string, string> = {}): ExecSpec => ({
      command,
      args: [],
      mode: 'shell',
      env,
      workdir: '/workspace',
    });
    const run = async (rid: string, spec: ExecSpec) => within(collect(p.exec(rid, spec, never)), 15_000, `exec ${spec.command}`);

    beforeAll(async () => {
      expect((await probeIsolation()).isolated, 'this host must allow PID namespaces (util-linux unshare)').toBe(true);
      fx = make();
      p = fx.provider;
      const spawn = async () =>
        (
          await p.spawn({
            sandbox_id: `sb-iso${randomBytes(4).toString('hex')}`,
            image: 'any',
            memory_mb: 64,
            vcpus: 1,
            metadata: {},
            owner_id: null,
          })
        ).runtime_id;
      a = await spawn();
      b = await spawn();
    });
    afterAll(async () => {
      for (const r of [a, b]) if (r) await p.destroy(r).catch(() => undefined);
      fx?.cleanup();
    });

    it('health reports no isolation warning', async () => {
      const h = await p.health();
      expect(h.healthy, h.error).toBe(true);
      expect(h.warning).toBeUndefined();
    });

    it('sees only its own processes in /proc, as PID 1 and below', async () => {
      const res = await run(
        a,
        sh('echo "self=$$"; ls /proc; test -e /proc/$SERVER/environ && echo visible || echo hidden', { SERVER: String(process.pid) }),
      );
      expect(res.exitCode).toBe(0);
      const lines = res.stdout.trim().split('\n');
      const pids = lines.filter((l) => /^\d+$/.test(l)).map(Number);
      expect(pids).toContain(1);
      expect(pids).not.toContain(process.pid);
      expect(pids.every((n) => n < 100)).toBe(true);
      expect(lines[lines.length - 1]).toBe('hidden');
    });

    it("cannot read another running exec's environment or the server's, and cannot signal them", async () => {
      const canary = `canary${randomBytes(6).toString('hex')}`;
      const hostCanary = `hostcanary${randomBytes(6).toString('hex')}`;
      const own = `own${randomBytes(6).toString('hex')}`;
      process.env.SBX_ISOLATION_TEST_SECRET = hostCanary;
      const sleepArgs = ['sleep', String(900 + Math.floor(Math.random() * 99))];
      const ac = new AbortController();
      const iter = p.exec(a, sh(`echo ready; exec ${sleepArgs.join(' ')}`, { SECRET_TOKEN: canary }), ac.signal)[Symbol.asyncIterator]();
      try {
        const first = (await within(iter.next(), 10_000, 'first chunk')).value as ExecEvent;
        expect(first).toMatchObject({ stream: 'stdout' });
        // `exec sleep` may come just after the first chunk.
        let victims = hostPidsRunning(sleepArgs);
        for (const deadline = Date.now() + 5_000; victims.length === 0 && Date.now() < deadline; victims = hostPidsRunning(sleepArgs)) {
          await new Promise((r) => setTimeout(r, 20));
        }
        expect(victims).toHaveLength(1);
        // The patterns travel split, so the scanning command's own environment never holds them whole.
        const scan = (rid: string) =>
          run(
            rid,
            sh(
              'for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null > /tmp/scan.$$; ' +
                'for w in "$C1$C2" "$H1$H2" "$O1$O2"; do grep -c "$w" /tmp/scan.$$; done; rm -f /tmp/scan.$$; ' +
                'kill -9 "$SERVER" 2>/dev/null; echo "kill-server=$?"; kill -9 "$VICTIM" 2>/dev/null; echo "kill-exec=$?"',
              {
                C1: canary.slice(0, 9),
                C2: canary.slice(9),
                H1: hostCanary.slice(0, 9),
                H2: hostCanary.slice(9),
                O1: own.slice(0, 5),
                O2: own.slice(5),
                OWN_VALUE: own,
                SERVER: String(process.pid),
                VICTIM: String(victims[0]),
              },
            ),
          );
        for (const rid of [a, b]) {
          const res = await scan(rid);
          // canary of the other exec: 0; the server's environment: 0; its own environment: found.
          const [other, host, self, killServer, killExec] = res.stdout.trim().split('\n');
          // One PID namespace per sandbox (as a container): its own execs see each other; another sandbox's never.
          if (rid === a) expect(Number(other), "the same sandbox's other exec").toBeGreaterThanOrEqual(1);
          else expect(other, "other exec's env visible from another sandbox").toBe('0');
          expect(host).toBe('0');
          expect(Number(self)).toBeGreaterThanOrEqual(1);
          expect(killServer).not.toBe('kill-server=0');
          expect(killExec).not.toBe('kill-exec=0');
        }
        // Both are still running: the test process (here) and the first exec.
        expect(hostPidsRunning(sleepArgs)).toEqual(victims);
      } finally {
        delete process.env.SBX_ISOLATION_TEST_SECRET;
        ac.abort();
        await iter.return?.();
      }
    });

    it('passes the guest environment outside argv, LD_* and PROOT_* included', async () => {
      const env = { LD_PRELOAD_NOT: 'x', LD_PRELOAD: '', PROOT_VERBOSE: '9', TMPDIR: '/tmp', SBX_GUEST_RENAMED: 'mine', PLAIN: 'p q' };
      const res = await run(
        a,
        sh(
          'for v in LD_PRELOAD_NOT LD_PRELOAD PROOT_VERBOSE TMPDIR SBX_GUEST_RENAMED PLAIN; do eval "printf ' +
            '\'%s=[%s]\\n\' $v \\"\\$$v\\""; done; env | grep -c "^SBX_GUEST_" || true',
          env,
        ),
      );
      expect(res.stdout).toBe(
        'LD_PRELOAD_NOT=[x]\nLD_PRELOAD=[]\nPROOT_VERBOSE=[9]\nTMPDIR=[/tmp]\nSBX_GUEST_RENAMED=[mine]\nPLAIN=[p q]\n1\n',
      );
      expect(res.exitCode).toBe(0);
    });
  });
}

suite('mock', mockFixture);
describe.skipIf(!prootEnabled)('proot (set SBX_TEST_PROOT=1; needs proot and busybox-static)', () => {
  suite('proot', prootFixture);
});
