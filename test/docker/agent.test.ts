import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type Docker from 'dockerode';
import type { ExecEvent, ExecSpec, Provider } from '../../src/core/ports/index.js';
import { isSbxError } from '../../src/core/errors.js';
import {
  DOCKER_SKIP,
  dockerTitle,
  engineRun,
  removeInstallation,
  requireEngine,
  TEST_IMAGE,
  testInstallationId,
  testProvider,
} from './engine.js';
import { requireAgentBinary } from './agent-helpers.js';

async function run(
  p: Provider,
  rid: string,
  command: string,
  extra: Partial<ExecSpec> = {},
): Promise<{ stdout: string; stderr: string; exitCode: number }> {
  let stdout = '';
  let stderr = '';
  let exitCode = -1;
  for await (const e of p.exec(rid, { command, args: [], mode: 'shell', env: {}, ...extra }, AbortSignal.timeout(20_000))) {
    if (e.stream === 'exit') exitCode = e.exit_code;
    else if (e.stream === 'stdout') stdout += Buffer.from(e.data).toString();
    else stderr += Buffer.from(e.data).toString();
  }
  return { stdout, stderr, exitCode };
}

/** Kills the container's agent (SIGKILL) through the engine and says how many it killed. */
const KILL_AGENT =
  'n=0; for f in /proc/[0-9]*/cmdline; do if grep -q "^/.sbx/sbx-agent" "$f" 2>/dev/null; then ' +
  'd=${f%/cmdline}; kill -9 ${d#/proc/} && n=$((n+1)); fi; done; echo "killed $n"';
/** True when the shell that ran the command was started by sbx-agent (its parent). */
const VIA_AGENT = 'tr "\\0" " " < /proc/$PPID/cmdline 2>/dev/null; true';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx-agent in docker containers'), () => {
  let docker: Docker;
  const installationId = testInstallationId();
  let p: Provider;
  let off: Provider;
  const spawn = async (prov: Provider, id: string) =>
    (
      await prov.spawn(
        { sandbox_id: `${id}-${installationId}`, image: TEST_IMAGE, memory_mb: 64, vcpus: 1 } as never,
        AbortSignal.timeout(60_000),
      )
    ).runtime_id;

  beforeAll(async () => {
    docker = await requireEngine();
    p = testProvider(installationId, { agent: 'auto', agentBinary: requireAgentBinary() });
    off = testProvider(installationId, { agent: 'off' });
  });
  afterAll(async () => {
    await p?.close?.();
    if (docker) await removeInstallation(docker, installationId);
  });

  it('runs execs through the agent, without the control plane environment or the agent token', async () => {
    process.env.SBX_TEST_SECRET_OF_THE_CONTROL_PLANE = 'leak';
    const rid = await spawn(p, 'env');
    delete process.env.SBX_TEST_SECRET_OF_THE_CONTROL_PLANE;
    expect(p.config().agent).toBe('on');
    expect((await run(p, rid, VIA_AGENT)).stdout).toContain('/.sbx/sbx-agent');
    const env = (await run(p, rid, 'env')).stdout;
    expect(env).not.toContain('SBX_AGENT_TOKEN');
    expect(env).not.toContain('SBX_TEST_SECRET_OF_THE_CONTROL_PLANE');
    expect(env).toMatch(/^PATH=/m);
  });

  it('output queued behind a slow consumer comes merged into bigger chunks, byte-exact, in order, streams apart', async () => {
    const rid = await spawn(p, 'merge');
    const chunks: Array<{ stream: string; data: Buffer }> = [];
    let exitCode = -1;
    // 4 MiB of numbered lines on stdout, and a marker on stderr before and after it.
    const command = 'echo begin >&2; seq 1 600000; echo end >&2';
    for await (const e of p.exec(rid, { command, args: [], mode: 'shell', env: {} }, AbortSignal.timeout(60_000))) {
      if (e.stream === 'exit') exitCode = e.exit_code;
      else chunks.push({ stream: e.stream, data: Buffer.from(e.data) });
      // A consumer slower than the command: the agent's frames queue up behind it.
      if (chunks.length <= 8) await new Promise((r) => setTimeout(r, 50));
    }
    expect(exitCode).toBe(0);
    const stdout = Buffer.concat(chunks.filter((c) => c.stream === 'stdout').map((c) => c.data)).toString();
    const expected = Array.from({ length: 600000 }, (_, i) => `${i + 1}\n`).join('');
    expect(stdout.length).toBe(expected.length);
    expect(stdout === expected).toBe(true);
    expect(chunks.filter((c) => c.stream === 'stderr').map((c) => c.data.toString())).toEqual(['begin\n', 'end\n']);
    // The agent sends at most 64 KiB a frame: bigger chunks are frames merged while the consumer waited.
    expect(Math.max(...chunks.map((c) => c.data.byteLength))).toBeGreaterThan(64 * 1024);
    expect(Math.max(...chunks.map((c) => c.data.byteLength))).toBeLessThanOrEqual(1024 * 1024);
  });

  it('killing the agent mid-exec fails that exec cleanly; the next one runs through the engine', async () => {
    const rid = await spawn(p, 'kill');
    const events: ExecEvent[] = [];
    let failure: unknown;
    const it = p.exec(
      rid,
      { command: 'echo started; sleep 30; echo never', args: [], mode: 'shell', env: {} },
      AbortSignal.timeout(20_000),
    );
    const started = performance.now();
    try {
      for await (const e of it) {
        events.push(e);
        if (e.stream === 'stdout' && Buffer.from(e.data).toString().includes('started')) {
          const k = await engineRun(docker, rid, KILL_AGENT);
          expect(k.out).toBe('killed 1\n');
        }
      }
    } catch (err) {
      failure = err;
    }
    expect(isSbxError(failure) && failure.code === 'provider_error' && /agent went away/.test(failure.message)).toBe(true);
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(events.some((e) => e.stream === 'exit')).toBe(false);
    // The command died with its agent (killed through the engine), and the next exec falls back.
    const ps = await engineRun(docker, rid, 'ps -o args');
    expect(ps.out).not.toContain('sleep 30');
    const next = await run(p, rid, `echo again; ${VIA_AGENT}`);
    expect(next.exitCode).toBe(0);
    expect(next.stdout).toContain('again');
    expect(next.stdout).not.toContain('sbx-agent');
    // Files too.
    await p.writeFile(rid, '/workspace/after.txt', Buffer.from('x'), undefined);
    expect(Buffer.from(await p.readFile(rid, '/workspace/after.txt')).toString()).toBe('x');
  });

  it('a sandbox sees only its own agent socket, cannot tamper with the binary, and a swapped socket is refused', async () => {
    const a = await spawn(p, 'a');
    const b = await spawn(p, 'b');
    await run(p, b, 'true'); // B's agent is up and connected
    const listing = await engineRun(docker, a, 'ls -a /.sbx/run; echo; ls -a / | grep -c sbx');
    expect(listing.out.split('\n').filter((l) => l && !l.startsWith('.'))).toEqual(['agent.sock', '1']);
    // The binary is a read-only mount: neither written, replaced nor removed, even by root.
    for (const cmd of [
      'echo x > /.sbx/sbx-agent',
      'cp /bin/busybox /.sbx/sbx-agent',
      'rm -f /.sbx/sbx-agent',
      'chmod 777 /.sbx/sbx-agent',
    ]) {
      const r = await run(p, a, `{ ${cmd}; } 2>&1; echo "exit=$?"`);
      expect(r.stdout, cmd).toMatch(/Read-only file system|busy/);
      expect(r.stdout, cmd).not.toMatch(/exit=0\n$/);
    }
    // B's host socket, linked into A's socket directory, then A's agent killed (its connection, made
    // at start, goes): the reconnect finds B's socket and refuses it (it says hello with B's token),
    // so A's exec runs through the engine, in A.
    const a2 = await spawn(p, 'a2');
    const bSock = (await docker.getContainer(b).inspect()).Mounts.find((m) => m.Destination === '/.sbx/run')!.Source + '/agent.sock';
    await engineRun(docker, a2, `rm -f /.sbx/run/agent.sock && ln -s ${bSock} /.sbx/run/agent.sock && echo swapped`);
    const killed = await engineRun(docker, a2, KILL_AGENT);
    expect(killed.out).toBe('killed 1\n');
    const host = await run(p, a2, `cat /etc/hostname; ${VIA_AGENT}`);
    expect(host.stdout.startsWith(a2.slice(0, 12))).toBe(true);
    expect(host.stdout).not.toContain('sbx-agent');
  });

  it(
    'with a configured user the agent and its execs run as that user, like the engine path; other users ' + 'cannot reach the socket',
    async () => {
      const inst = `${installationId}u`;
      const pu = testProvider(inst, { agent: 'auto', agentBinary: requireAgentBinary(), user: '1000:1000' });
      const ou = testProvider(inst, { agent: 'off', user: '1000:1000' });
      try {
        const rid = await spawn(pu, 'user');
        const viaAgent = await run(pu, rid, `id -u; id -g; ${VIA_AGENT}`);
        expect(viaAgent.stdout).toContain('sbx-agent');
        const viaEngine = await run(ou, rid, 'id -u; id -g');
        expect(viaAgent.stdout.split('\n').slice(0, 2)).toEqual(viaEngine.stdout.split('\n').slice(0, 2));
        expect(viaEngine.stdout).toBe('1000\n1000\n');
        const perms = await engineRun(docker, rid, 'stat -c "%a %u" /.sbx/run /.sbx/run/agent.sock');
        expect(perms.out).toBe('700 1000\n600 1000\n');
        // Another uid in the same container (a pool tenant) can neither list nor connect.
        const other = await run(pu, rid, 'ls /.sbx/run 2>&1; echo "exit=$?"', { user: { uid: 2000, gid: 2000 } });
        expect(other.stdout).toMatch(/Permission denied/);
        // Files written through the agent are the user's.
        await pu.writeFile(rid, '/workspace/mine.txt', Buffer.from('m'), undefined);
        expect((await engineRun(docker, rid, 'stat -c "%u %a" /workspace/mine.txt')).out).toBe('1000 644\n');
      } finally {
        await pu.close?.();
        await removeInstallation(docker, inst);
      }
    },
  );

  it('writes atomically and never through a symlink at the final component', async () => {
    const rid = await spawn(p, 'files');
    await run(p, rid, 'echo secret > /workspace/target; ln -s /workspace/target /workspace/link');
    await p.writeFile(rid, '/workspace/link', Buffer.from('new'), undefined);
    expect((await run(p, rid, 'cat /workspace/target; [ -L /workspace/link ] && echo link || echo file')).stdout).toBe('secret\nfile\n');
    // No temp files are left behind.
    expect((await run(p, rid, 'ls -a /workspace | grep -c sbx-write; true')).stdout.trim()).toBe('0');
    // A destroy removes the container's socket directory.
    const dir = (await docker.getContainer(rid).inspect()).Mounts.find((m) => m.Destination === '/.sbx/run')!.Source;
    expect(existsSync(dir)).toBe(true);
    await p.destroy(rid, AbortSignal.timeout(30_000));
    expect(existsSync(dir)).toBe(false);
    expect((await run(off, await spawn(off, 'plain'), 'ls -a /.sbx 2>&1; true')).stdout).toMatch(/No such file/);
  });
});
