/** Pause and resume on mock (DESIGN.md §16): the cgroup freezer on the sandbox's PID namespace. */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { useProviderServer } from '../helpers/provider-server.js';
import { waitFor } from '../helpers/wait.js';
import { startWs, stdoutOf } from '../helpers/ws.js';
import { pauseContract, startCounter } from './pause.contract.js';

describe('pause and resume on mock', () => {
  const server = useProviderServer('mock');
  pauseContract(() => server());

  it('a WebSocket exec on a paused sandbox resumes it first; an open one makes a pause 409', async () => {
    const srv = server();
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/pause`);
    const c = await startWs(srv.url, id, { command: 'echo via-ws' });
    const msgs = await c.rest();
    expect(stdoutOf(msgs)).toBe('via-ws\n');
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`)).body.state).toBe('running');
    const open = await startWs(srv.url, id, { command: 'cat', mode: 'argv' });
    // The session is in flight once its command runs: wait for the echo of a first line.
    open.send({ type: 'stdin', data: 'ping\n' });
    await waitFor('the echo of the first line', () => stdoutOf(open.seen).includes('ping'));
    expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/pause`)).status).toBe(409);
    open.send({ type: 'stdin_eof' });
    await open.rest();
    expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/pause`)).status).toBe(200);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
  }, 60_000);

  it('the freezer cgroup exists while the sandbox lives and is removed with it', async () => {
    const srv = server();
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const dir = `/sys/fs/cgroup/freezer/sbx/${id}`;
    expect(existsSync(dir)).toBe(true);
    await startCounter({ url: srv.url, spawn: async () => id }, id);
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/pause`);
    expect(readFileSync(`${dir}/freezer.state`, 'utf8').trim()).toBe('FROZEN');
    // Every process of the sandbox's namespace is in it.
    expect(readFileSync(`${dir}/cgroup.procs`, 'utf8').trim().split('\n').length).toBeGreaterThanOrEqual(2);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    expect(existsSync(dir)).toBe(false);
  }, 60_000);

  it('after a restart a paused mock sandbox is running (its processes are gone with the old server)', async () => {
    const plane = server().restartable();
    try {
      const url = await plane.start();
      const id = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
      await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/kept.txt', content: 'kept' });
      expect((await call(url, 'POST', `/api/v1/sandboxes/${id}/pause`)).body.state).toBe('paused');
      await plane.stop();
      // Stopped: nothing is left frozen, so the sandbox's processes die with the server.
      expect(readFileSync(`/sys/fs/cgroup/freezer/sbx/${id}/freezer.state`, 'utf8').trim()).toBe('THAWED');
      const again = await plane.start();
      expect((await call(again, 'GET', `/api/v1/sandboxes/${id}`)).body.state).toBe('running');
      const read = await fetch(`${again}/api/v1/sandboxes/${id}/files?path=/kept.txt`);
      expect(await read.text()).toBe('kept');
      expect((await call(again, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'echo alive' })).body.stdout).toBe('alive\n');
    } finally {
      await plane.remove();
    }
  }, 60_000);
});
