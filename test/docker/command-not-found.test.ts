import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openWs } from '../helpers/ws.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

/**
 * DESIGN §5 on docker through the API: a missing command is exit 127 with `sbx: command not
 * found: NAME`, a file that cannot be executed 126 with `sbx: permission denied: NAME`, in
 * buffered, streamed (NDJSON) and WebSocket exec alike — never the runtime's text.
 */
describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker: command not found through the API'), () => {
  let srv: TestServer;
  let id: string;

  beforeAll(async () => {
    await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker', docker: { socket_path: SOCKET } }, defaults: { image: TEST_IMAGE } });
    const spawned = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(spawned.status).toBe(201);
    id = spawned.body.id;
    const w = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/data.txt', content: 'x' });
    expect(w.status).toBeLessThan(300);
  });
  afterAll(async () => {
    if (srv) {
      await removeInstallation(await requireEngine(), srv.plane.installationId);
      await srv.close();
    }
  });

  it('buffered: 127 and 126 with sbx text, in argv and shell mode', async () => {
    const exec = (body: Record<string, unknown>) => call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, body);
    expect((await exec({ command: 'sbx-nope', args: ['a'], mode: 'argv' })).body).toMatchObject({
      exit_code: 127,
      stdout: '',
      stderr: 'sbx: command not found: sbx-nope\n',
    });
    expect((await exec({ command: 'sbx-nope', args: ['a'] })).body).toMatchObject({
      exit_code: 127,
      stdout: '',
      stderr: 'sbx: command not found: sbx-nope\n',
    });
    expect((await exec({ command: '/workspace/data.txt', mode: 'argv' })).body).toMatchObject({
      exit_code: 126,
      stdout: '',
      stderr: 'sbx: permission denied: /workspace/data.txt\n',
    });
    expect((await exec({ command: '/workspace/data.txt' })).body).toMatchObject({
      exit_code: 126,
      stdout: '',
      stderr: 'sbx: permission denied: /workspace/data.txt\n',
    });
  });

  it('streamed: one stderr chunk with sbx text, then the exit record', async () => {
    const res = await fetch(`${srv.url}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'sbx-nope', mode: 'argv', stream: true, exit_record: true }),
    });
    expect(res.status).toBe(200);
    const lines = (await res.text())
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { stream: string; data: string; exit_code?: number });
    expect(lines.slice(0, -1)).toEqual([{ stream: 'stderr', data: 'sbx: command not found: sbx-nope\n' }]);
    expect(lines[lines.length - 1]).toMatchObject({ stream: 'exit', exit_code: 127 });
  });

  it('WebSocket: stderr with sbx text, then exit 127', async () => {
    const ws = await openWs(srv.url, `/api/v1/sandboxes/${id}/exec/ws`);
    ws.send({ type: 'start', command: 'sbx-nope', args: [], mode: 'argv' });
    const msgs = await ws.rest(15_000);
    expect(msgs.filter((m) => m.type === 'stdout')).toEqual([]);
    expect(
      msgs
        .filter((m) => m.type === 'stderr')
        .map((m) => m.data)
        .join(''),
    ).toBe('sbx: command not found: sbx-nope\n');
    expect(msgs[msgs.length - 1]).toMatchObject({ type: 'exit', exit_code: 127 });
  });
});
