import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { waitFor } from '../helpers/wait.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { openWs, startWs, stderrOf, stdoutOf, UpgradeRefused, type WsClient } from '../helpers/ws.js';

const b64 = (s: string) => Buffer.from(s).toString('base64');

/** Reads messages until everything the session printed on stdout so far contains `text`. */
async function waitStdout(c: WsClient, text: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!stdoutOf(c.seen).includes(text)) {
    const m = await c.next(Math.max(1, deadline - Date.now()));
    if (m.type === 'exit' || m.type === 'error') throw new Error(`ended before ${JSON.stringify(text)}: ${JSON.stringify(m)}`);
  }
}

const fileExists = async (srv: TestServer, id: string, path: string) =>
  (await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/files/stat?path=${encodeURIComponent(path)}`)).status === 200;

describe('WebSocket exec (mock provider)', () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_exec_timeout: '5s' } });
    id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
  });
  afterAll(async () => srv?.close());

  it('runs a command: stdout and stderr apart, exit code, then the server closes', async () => {
    const c = await startWs(srv.url, id, { command: 'echo out; echo err >&2; exit 3' });
    const msgs = await c.rest();
    expect(stdoutOf(msgs)).toBe('out\n');
    expect(stderrOf(msgs)).toBe('err\n');
    expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 3 });
    expect(msgs.at(-1)!.duration).toMatch(/s$/);
    expect(await c.closed).toBe(1000);
  });

  it('accepts a plain exec request without type as start (argv mode, args, env, workdir)', async () => {
    const c = await openWs(srv.url, `/api/v1/sandboxes/${id}/exec/ws`);
    c.send({ command: 'sh', args: ['-c', 'printf "%s|%s" "$FOO" "$(pwd)"'], mode: 'argv', env: { FOO: 'a b' }, workdir: '/tmp' });
    const msgs = await c.rest();
    expect(stdoutOf(msgs)).toMatch(/^a b\|.*\/tmp$/);
    expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('streams stdin: the first chunk is echoed before the second is sent; stdin_eof ends cat', async () => {
    const c = await startWs(srv.url, id, { command: 'cat', mode: 'argv' });
    c.send({ type: 'stdin', data: 'first\n' });
    await waitStdout(c, 'first\n');
    c.send({ type: 'stdin', data: b64('second é\n'), encoding: 'base64' });
    await waitStdout(c, 'second é\n');
    c.send({ type: 'stdin_eof' });
    const rest = await c.rest();
    expect(rest.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('initial stdin in the start message; the command sees EOF only at stdin_eof', async () => {
    const c = await startWs(srv.url, id, { command: 'cat; echo "[eof]"', stdin: 'pre\n' });
    await waitStdout(c, 'pre\n');
    // Still reading: a later line is echoed too (an EOF after the initial stdin would have ended cat).
    c.send({ type: 'stdin', data: 'more\n' });
    await waitStdout(c, 'pre\nmore\n');
    expect(c.seen.some((m) => m.type === 'exit')).toBe(false);
    c.send({ type: 'stdin_eof' });
    const rest = await c.rest();
    expect(stdoutOf(rest)).toBe('[eof]\n');
    expect(rest.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('large stdin a command reads late arrives whole (flow control pauses the socket meanwhile)', async () => {
    const c = await startWs(srv.url, id, { command: 'sleep 1; wc -c' });
    const chunk = Buffer.alloc(64 * 1024, 0x61).toString('base64');
    for (let i = 0; i < 64; i++) c.send({ type: 'stdin', data: chunk, encoding: 'base64' });
    c.send({ type: 'stdin_eof' });
    const msgs = await c.rest();
    expect(stdoutOf(msgs).trim()).toBe(String(64 * 64 * 1024));
    expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('a deadline ends with exit 124, timed_out, a stderr note and exec.timeout', async () => {
    const c = await startWs(srv.url, id, { command: 'echo started; sleep 30', timeout: '500ms' });
    const msgs = await c.rest();
    expect(stdoutOf(msgs)).toBe('started\n');
    expect(stderrOf(msgs)).toMatch(/timed out/);
    expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 124, timed_out: true });
    expect(srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type)).toContain('exec.timeout');
  });

  it('a timeout above the maximum is resource_limit before anything runs', async () => {
    const c = await startWs(srv.url, id, { command: 'touch /workspace/ws-ran', timeout: '1m' });
    const msgs = await c.rest();
    expect(msgs).toEqual([expect.objectContaining({ type: 'error', code: 'resource_limit' })]);
    expect(await fileExists(srv, id, '/workspace/ws-ran')).toBe(false);
  });

  it('an unknown sandbox is an error message not_found after the upgrade', async () => {
    const c = await startWs(srv.url, 'sb-doesnotexist', { command: 'true' });
    expect(await c.rest()).toEqual([expect.objectContaining({ type: 'error', code: 'not_found' })]);
  });

  it('bad messages are bad_request errors and end the session', async () => {
    const bad = async (first: unknown, second?: unknown) => {
      const c = await openWs(srv.url, `/api/v1/sandboxes/${id}/exec/ws`);
      c.send(first);
      if (second !== undefined) c.send(second);
      const msgs = await c.rest();
      return msgs.at(-1)!;
    };
    expect(await bad('{not json')).toMatchObject({ type: 'error', code: 'bad_request', message: expect.stringMatching(/JSON/) });
    expect(await bad({ type: 'stdin', data: 'x' })).toMatchObject({
      type: 'error',
      code: 'bad_request',
      message: expect.stringMatching(/first message/),
    });
    expect(await bad({ type: 'start' })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await bad({ type: 'start', command: 'true', bogus: 1 })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await bad({ type: 'start', command: 'true', workdir: 'relative' })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await bad({ type: 'start', command: 'sleep 5' }, { type: 'launch' })).toMatchObject({
      type: 'error',
      code: 'bad_request',
      message: expect.stringMatching(/unknown message type/),
    });
    expect(await bad({ type: 'start', command: 'sleep 5' }, { type: 'resize', cols: 0, rows: 10 })).toMatchObject({
      type: 'error',
      code: 'bad_request',
    });
    expect(await bad({ type: 'start', command: 'sleep 5' }, { type: 'signal', signal: 'SIGSTOP' })).toMatchObject({
      type: 'error',
      code: 'bad_request',
    });
    expect(await bad({ type: 'start', command: 'sleep 5' }, { type: 'stdin', data: '%%%', encoding: 'base64' })).toMatchObject({
      type: 'error',
      code: 'bad_request',
    });
  });

  it('signals reach the command: SIGINT → 130, TERM → 143, KILL → 137', async () => {
    for (const [signal, code] of [
      ['SIGINT', 130],
      ['TERM', 143],
      ['sigkill', 137],
    ] as const) {
      const c = await startWs(srv.url, id, { command: 'echo ready; exec sleep 30' });
      await waitStdout(c, 'ready');
      c.send({ type: 'signal', signal });
      const msgs = await c.rest(5_000);
      expect(msgs.at(-1), signal).toMatchObject({ type: 'exit', exit_code: code });
    }
  });

  it('a tty request on a provider without terminals runs with pipes; resize is accepted', async () => {
    const c = await startWs(srv.url, id, { command: 'cat', mode: 'argv', tty: true, cols: 100, rows: 30 });
    c.send({ type: 'resize', cols: 120, rows: 40 });
    c.send({ type: 'stdin', data: 'hi\n' });
    await waitStdout(c, 'hi\n');
    c.send({ type: 'stdin_eof' });
    expect((await c.rest()).at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('a client that disconnects kills the command', async () => {
    const c = await startWs(srv.url, id, { command: 'echo $$ > /workspace/ws-pid; echo go; sleep 5; touch /workspace/ws-late' });
    await waitStdout(c, 'go');
    c.ws.terminate();
    // Killed: the shell that would write the file is gone (well before its 5 s sleep ends).
    const gone = async () =>
      (
        await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
          command: 'kill -0 "$(cat /workspace/ws-pid)" 2>/dev/null || echo gone',
        })
      ).body.stdout === 'gone\n';
    await waitFor('the disconnected command is killed', gone, 4_000);
    expect(await fileExists(srv, id, '/workspace/ws-late')).toBe(false);
  });

  it('emits the exec events and captures output into the console log', async () => {
    const c = await startWs(srv.url, id, { command: 'echo ws-console-line' });
    await c.rest();
    const events = srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(['exec.started', 'exec.completed']));
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs`)).body).toContain('ws-console-line');
  });

  it('is described in the OpenAPI document as a GET answering 101', async () => {
    const doc = (await call(srv.url, 'GET', '/api/v1/openapi.json')).body;
    const op = doc.paths['/api/v1/sandboxes/{id}/exec/ws'].get;
    expect(op.tags).toEqual(['exec']);
    expect(op.responses['101']).toEqual({ description: expect.stringMatching(/^Switching Protocols/) });
    expect(op.description).toMatch(/stdin_eof/);
  });

  it('a plain GET without an upgrade is 426 with an error body', async () => {
    const res = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/exec/ws`);
    expect(res.status).toBe(426);
    expect(res.body.code).toBe('bad_request');
    expect(res.headers.get('upgrade')).toBe('websocket');
  });
});

describe('WebSocket exec with auth and ownership', () => {
  const KEY = 'ws-user-key-0123456789abcdef0123456789abcdef';
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: KEY, enforce_ownership: true } });
  });
  afterAll(async () => srv?.close());

  it('refuses an upgrade without or with a wrong X-API-Key with a 401 JSON answer', async () => {
    for (const headers of [{}, { 'x-api-key': 'wrong' }] as Array<Record<string, string>>) {
      const err = await openWs(srv.url, '/api/v1/sandboxes/sb-x/exec/ws', headers).then(
        () => new Error('upgrade was accepted'),
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(UpgradeRefused);
      expect((err as UpgradeRefused).status).toBe(401);
      expect(JSON.parse((err as UpgradeRefused).body)).toMatchObject({ code: 'unauthorized' });
    }
  });

  it('runs with the key; another owner sees not_found', async () => {
    const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'x-api-key': KEY, 'x-user-id': 'alice' });
    const id = spawn.body.id as string;
    const mine = await startWs(srv.url, id, { command: 'echo mine' }, { 'x-api-key': KEY, 'x-user-id': 'alice' });
    expect(stdoutOf(await mine.rest())).toBe('mine\n');
    const theirs = await startWs(srv.url, id, { command: 'echo theirs' }, { 'x-api-key': KEY, 'x-user-id': 'bob' });
    expect(await theirs.rest()).toEqual([expect.objectContaining({ type: 'error', code: 'not_found' })]);
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('WebSocket exec (docker provider)'), () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    await requireEngine();
    srv = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes');
    expect(spawn.status).toBe(201);
    id = spawn.body.id;
  });
  afterAll(async () => {
    if (id) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`).catch(() => undefined);
    await srv?.close();
  });

  it('streams stdin chunk by chunk and half-closes on stdin_eof', async () => {
    const c = await startWs(srv.url, id, { command: 'cat; echo "[eof]"' });
    c.send({ type: 'stdin', data: 'first\n' });
    await waitStdout(c, 'first\n', 10_000);
    c.send({ type: 'stdin', data: 'second\n' });
    await waitStdout(c, 'second\n', 10_000);
    c.send({ type: 'stdin_eof' });
    const rest = await c.rest();
    expect(stdoutOf(rest)).toBe('[eof]\n');
    expect(rest.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
  });

  it('runs in a terminal: isatty, size, resize, and SIGINT', async () => {
    const c = await startWs(srv.url, id, { command: '/bin/sh', mode: 'argv', tty: true, cols: 91, rows: 27, env: { PS1: '$ ' } });
    // The terminal echoes input: expected output is computed, so the echo never matches it.
    c.send({ type: 'stdin', data: '[ -t 0 ] && echo "tty-$((1+1))"; stty size\n' });
    await waitStdout(c, 'tty-2', 10_000);
    await waitStdout(c, '27 91', 10_000);
    c.send({ type: 'resize', cols: 132, rows: 43 });
    // The resize has no answer on the socket: ask for the size until it shows.
    await waitFor('the terminal resized', async () => {
      c.send({ type: 'stdin', data: 'stty size\n' });
      return waitStdout(c, '43 132', 500).then(
        () => true,
        () => false,
      );
    });
    // SIGINT reaches the foreground command; the interactive shell survives it, as after ^C.
    c.send({ type: 'stdin', data: 'echo "sleep-$((2+3))"; sleep 31\n' });
    await waitStdout(c, 'sleep-5', 10_000);
    const sleeping = async () =>
      (await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'ps -o args | grep -c "^sleep 31$"' })).body.stdout;
    await waitFor('the foreground sleep runs', async () => (await sleeping()) === '1\n');
    c.send({ type: 'signal', signal: 'SIGINT' });
    await waitFor('the foreground sleep is interrupted', async () => (await sleeping()) === '0\n');
    c.send({ type: 'stdin', data: 'echo "after-$((40+2))"\n' });
    await waitStdout(c, 'after-42', 10_000);
    c.send({ type: 'stdin', data: 'exit 5\n' });
    const rest = await c.rest();
    expect(rest.at(-1)).toMatchObject({ type: 'exit', exit_code: 5 });
  });

  it('a signal kills the command with its code', async () => {
    const c = await startWs(srv.url, id, { command: 'echo ready; exec sleep 30' });
    await waitStdout(c, 'ready', 10_000);
    c.send({ type: 'signal', signal: 'SIGTERM' });
    expect((await c.rest()).at(-1)).toMatchObject({ type: 'exit', exit_code: 143 });
  });
});
