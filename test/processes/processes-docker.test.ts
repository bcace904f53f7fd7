/**
 * Background processes on docker: detached (their own session in the container, output in files
 * there), so they outlive a control-plane restart and their exit is recorded afterwards.
 */
import { describe, expect, it } from 'vitest';
import { engineRun } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { PROVIDER_SKIP, providerTitle, useProviderServer } from '../helpers/provider-server.js';
import { waitFor } from '../helpers/wait.js';
import { readOutput } from './helpers.js';
import { processContract } from './processes.contract.js';

describe.skipIf(PROVIDER_SKIP.docker !== undefined)(providerTitle('docker', 'background processes on docker'), () => {
  const server = useProviderServer('docker');
  processContract(() => ({ ...server(), runner: 'detached', tty: true }));

  it('a process outlives a control-plane restart; its output and exit code are recorded afterwards', async () => {
    const docker = server().docker!;
    const plane = server().restartable();
    try {
      const url = await plane.start();
      const sb = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
      // Two gates the test opens: the first while no control plane runs, the second after the restart.
      const gate = (n: number) => `while [ ! -e /tmp/gate${n} ]; do sleep 0.05; done`;
      const p = await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, {
        command: `echo before; ${gate(1)}; echo after; ${gate(2)}; echo oops >&2; exit 5`,
      });
      expect(p.status).toBe(201);
      const pid = p.body.id as string;
      const early = await readOutput(url, sb, pid, { follow: true, stopAfter: 7 });
      expect(early.bytes.toString()).toBe('before\n');
      const container = (await plane.plane!.deps.store.getSandbox(sb))!.runtime_id!;
      await plane.stop();
      // The process runs on while no control plane follows it: let it write its next line.
      await engineRun(docker, container, 'touch /tmp/gate1');
      await waitFor(
        'the process writes on',
        async () => (await engineRun(docker, container, `cat /tmp/.sbx-processes/${pid}/out`)).out === 'before\nafter\n',
      );
      const again = await plane.start();
      expect((await call(again, 'GET', `/api/v1/sandboxes/${sb}/processes/${pid}`)).body.state).toBe('running');
      await call(again, 'POST', `/api/v1/sandboxes/${sb}/exec`, { command: 'touch /tmp/gate2' });
      const rest = await readOutput(again, sb, pid, { follow: true, offset: early.next });
      const text = (s: string) =>
        rest.lines
          .filter((l) => l.stream === s)
          .map((l) => l.data)
          .join('');
      expect(text('stdout')).toBe('after\n');
      expect(text('stderr')).toBe('oops\n');
      expect(rest.lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 5, state: 'exited' });
      expect((await call(again, 'GET', `/api/v1/sandboxes/${sb}/processes/${pid}`)).body).toMatchObject({ state: 'exited', exit_code: 5 });
      // The files it used in the sandbox are gone once recorded.
      const ls = await call(again, 'POST', `/api/v1/sandboxes/${sb}/exec`, { command: `ls /tmp/.sbx-processes/${pid} 2>&1 || echo gone` });
      expect(ls.body.stdout).toMatch(/gone/);
    } finally {
      await plane.remove();
    }
  }, 90_000);

  it('a process in a destroyed sandbox ends as killed, and its records go with the sandbox', async () => {
    const srv = server();
    const sb = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const pid = (await call(srv.url, 'POST', `/api/v1/sandboxes/${sb}/processes`, { command: 'sleep 100' })).body.id as string;
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${sb}`)).status).toBe(200);
    const processes = srv.plane.deps.processes!;
    const until = Date.now() + 15_000;
    while (Date.now() < until && (await srv.plane.deps.store.getProcess(pid))?.state === 'running')
      await new Promise((r) => setTimeout(r, 200));
    expect((await srv.plane.deps.store.getProcess(pid))?.state).toBe('killed');
    expect(await processes.sweep()).toBeGreaterThanOrEqual(1);
    expect(await srv.plane.deps.store.getProcess(pid)).toBeNull();
  }, 60_000);
});
