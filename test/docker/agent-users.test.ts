import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_USER_AGENTS } from '../../src/adapters/providers/docker/agent-users.js';
import type { ExecSpec, Provider } from '../../src/core/ports/index.js';
import { requireAgentBinary } from './agent-helpers.js';
import { ensureE2bImage } from './e2b-image.js';
import {
  DOCKER_SKIP,
  dockerTitle,
  EngineTap,
  engineRun,
  removeInstallation,
  requireEngine,
  testInstallationId,
  testProvider,
} from './engine.js';

/*
 * Execs as another user than the container's go through a second sbx-agent started as that user
 * (agent-users.ts, docs/agent.md): one engine exec to start it, none for later execs.
 */

async function run(p: Provider, rid: string, command: string, extra: Partial<ExecSpec> = {}) {
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

const USER = { uid: 1000, gid: 1000 };
/** The command line of the shell's parent: sbx-agent (with its socket path) when an agent ran it. */
const PARENT = 'tr "\\0" " " < /proc/$PPID/cmdline 2>/dev/null; echo';
/** The uid of every sbx-agent process in the container, sorted. */
const AGENT_UIDS =
  'for d in /proc/[0-9]*; do if grep -q "^/.sbx/sbx-agent" $d/cmdline 2>/dev/null; then ' +
  'grep "^Uid:" $d/status | cut -f2; fi; done | sort -n | tr "\\n" " "';

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx-agent: execs as another user'), () => {
  let docker: Docker;
  let image: string;
  const installationId = testInstallationId();
  const stateDir = mkdtempSync(join(tmpdir(), 'sbx-agent-users-'));
  let tap: EngineTap;
  let p: Provider;
  let off: Provider;
  const spawn = async (id: string) =>
    (await p.spawn({ sandbox_id: `${id}-${installationId}`, image, memory_mb: 64, vcpus: 1 } as never, AbortSignal.timeout(60_000)))
      .runtime_id;

  beforeAll(async () => {
    docker = await requireEngine();
    image = await ensureE2bImage(docker);
    tap = new EngineTap(stateDir);
    await tap.open();
    // The tap relays to the engine's own socket: the agent stays on (a local unix socket).
    p = testProvider(installationId, {
      socketPath: tap.path,
      agent: 'auto',
      agentBinary: requireAgentBinary(),
      agentDir: join(stateDir, 'agents'),
    });
    off = testProvider(installationId, { agent: 'off' });
  }, 120_000);
  afterAll(async () => {
    await p?.close?.();
    await tap?.close();
    if (docker) await removeInstallation(docker, installationId);
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('runs an exec as uid 1000 through that user agent: one engine exec to start it, none after; as the engine would', async () => {
    const rid = await spawn('one');
    expect(p.config().agent).toBe('on');
    tap.take();
    const first = await run(p, rid, `id; ${PARENT}`, { user: USER });
    const started = tap.take();
    expect(started.filter((r) => r.startsWith('POST')).map((r) => r.replace(/[0-9a-f]{64}/, 'ID'))).toEqual([
      'POST /containers/ID/exec',
      'POST /exec/ID/start',
    ]);
    expect(first.stdout).toMatch(/^\/\.sbx\/sbx-agent \/\.sbx\/run\/u1000-1000\.[0-9a-f]{12}\/agent\.sock --once $/m);
    // Later execs as that user cost the engine nothing.
    const again = await run(p, rid, `id -u; id -g; touch /tmp/made-by-1000; stat -c "%u:%g" /tmp/made-by-1000; ${PARENT}`, { user: USER });
    expect(tap.take()).toEqual([]);
    expect(again.stdout).toMatch(/^1000\n1000\n1000:1000\n\/\.sbx\/sbx-agent \/\.sbx\/run\/u1000/);
    // The same identity (uid, gid, groups) and home as the engine's exec as that user.
    const engine = await run(off, rid, 'id; echo $HOME', { user: USER });
    const agent = await run(p, rid, 'id; echo $HOME', { user: USER });
    expect(agent).toEqual(engine);
    expect(engine.stdout).toBe('uid=1000(user) gid=1000(user) groups=1000(user)\n/home/user\n');
    // The container's own user still goes through the container's agent.
    expect((await run(p, rid, `id -u; ${PARENT}`)).stdout).toBe('0\n/.sbx/sbx-agent /.sbx/run/agent.sock \n');
    // Exit codes and sbx's own texts are the engine path's.
    expect(await run(p, rid, 'exit 3', { user: USER })).toMatchObject({ exitCode: 3 });
    const missing = await run(p, rid, 'no-such-cmd', { user: USER, mode: 'argv' });
    expect(missing).toEqual(await run(off, rid, 'no-such-cmd', { user: USER, mode: 'argv' }));
  });

  it('two users, two agents; neither another uid nor the container root reaches a user agent socket; destroy leaves nothing', async () => {
    const rid = await spawn('two');
    await run(p, rid, 'true', { user: USER });
    await run(p, rid, 'true', { user: { uid: 2000, gid: 2000 } });
    expect((await engineRun(docker, rid, AGENT_UIDS)).out).toBe('0 1000 2000 ');
    const dirs = (await engineRun(docker, rid, 'stat -c "%a %u %n" /.sbx/run /.sbx/run/u*')).out.split('\n');
    expect(dirs[0]).toBe('711 0 /.sbx/run');
    expect(dirs[1]).toMatch(/^700 1000 \/\.sbx\/run\/u1000-1000\.[0-9a-f]{12}$/);
    expect(dirs[2]).toMatch(/^700 2000 \/\.sbx\/run\/u2000-2000\.[0-9a-f]{12}$/);
    const hostDirs = readdirSync(join(stateDir, 'agents'));
    const mine = hostDirs.find((d) => d.startsWith('two-'));
    expect(mine).toBeDefined();
    const inside = readdirSync(join(stateDir, 'agents', mine!)).sort();
    expect(inside).toEqual(['agent.sock', expect.stringMatching(/^u1000-1000\./), expect.stringMatching(/^u2000-2000\./)]);
    // uid 2000, and the container's root (it holds no capability), cannot even resolve 1000's socket
    // (connecting needs the same search permission): they can neither connect to it nor replace it.
    const sock = `/.sbx/run/${inside[1]}/agent.sock`;
    const probe = `stat -c %u ${sock} 2>&1; ls /.sbx/run 2>&1; rm -f ${sock} 2>&1; echo "exit=$?"`;
    const as2000 = await run(p, rid, probe, { user: { uid: 2000, gid: 2000 } });
    expect(as2000.stdout.match(/Permission denied/g)).toHaveLength(3);
    const asRoot = await engineRun(docker, rid, probe);
    expect(asRoot.out.split('\n')[0]).toMatch(/Permission denied/);
    expect(asRoot.out).toMatch(/rm: .*Permission denied\nexit=1/);
    // Still served, as 1000.
    expect((await run(p, rid, `id -u; ${PARENT}`, { user: USER })).stdout).toContain(`1000\n/.sbx/sbx-agent ${sock} `);
    await p.destroy(rid, AbortSignal.timeout(30_000));
    expect(existsSync(join(stateDir, 'agents', mine!))).toBe(false);
  });

  it('a user agent serves one connection: closed by sbx or killed, nothing is left; the next exec starts a fresh one', async () => {
    const rid = await spawn('once');
    const q = testProvider(installationId, { agent: 'auto', agentBinary: requireAgentBinary(), agentDir: join(stateDir, 'agents') });
    const agentUids = async (want: string) => {
      let out = '';
      for (const end = Date.now() + 10_000; Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
        out = (await engineRun(docker, rid, AGENT_UIDS)).out;
        if (out === want) break;
      }
      return out;
    };
    expect((await run(q, rid, `id -u; ${PARENT}`, { user: USER })).stdout).toMatch(/^1000\n\/\.sbx\/sbx-agent .*u1000-1000/);
    expect(await agentUids('0 1000 ')).toBe('0 1000 ');
    await q.close?.();
    // Its connection closed: the user agent exited (its commands killed with it).
    expect(await agentUids('0 ')).toBe('0 ');
    // Killed from inside (as a pool tenant's release does): the next exec as that user gets a new one.
    await run(p, rid, 'sleep 60 & true', { user: USER });
    await engineRun(docker, rid, 'kill -9 -1', '1000:1000');
    expect(await agentUids('0 ')).toBe('0 ');
    const again = await run(p, rid, `id -u; ${PARENT}`, { user: USER });
    expect(again.stdout).toMatch(/^1000\n\/\.sbx\/sbx-agent .*u1000-1000/);
    expect(await agentUids('0 1000 ')).toBe('0 1000 ');
  });

  it(`at most ${MAX_USER_AGENTS} user agents per container, then the engine; a user agent that cannot start falls back`, async () => {
    const rid = await spawn('bound');
    const uids = Array.from({ length: MAX_USER_AGENTS + 1 }, (_, i) => 3000 + i);
    for (const uid of uids) {
      const r = await run(p, rid, `id -u; ${PARENT}`, { user: { uid, gid: uid } });
      expect(r.stdout.startsWith(`${uid}\n`)).toBe(true);
      if (uid === uids.at(-1)) expect(r.stdout).not.toContain('sbx-agent');
      else expect(r.stdout).toContain(`/.sbx/run/u${uid}-${uid}.`);
    }
    // The container's root makes the binary unreachable for other uids: the start fails, the engine serves.
    const other = await spawn('fail');
    await engineRun(docker, other, 'chmod 700 /.sbx');
    const r = await run(p, other, `id -u; ${PARENT}`, { user: USER });
    expect([r.stdout, r.exitCode]).toEqual(['1000\n\n', 0]);
    expect((await engineRun(docker, other, AGENT_UIDS)).out).toBe('0 ');
  });
});
