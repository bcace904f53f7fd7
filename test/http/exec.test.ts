import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/http.js';

let srv: TestServer;
let id: string;
beforeAll(async () => {
  srv = await startTestServer({ defaults: { max_exec_timeout: '5s' } });
  id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
});
afterAll(async () => srv?.close());

const exec = (body: unknown) => call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, body);

describe('buffered exec', () => {
  it('returns exit code, stdout, stderr, duration', async () => {
    const res = await exec({ command: 'echo out; echo err >&2; exit 3' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
    expect(res.body.duration).toMatch(/^\d+(\.\d+)?m?s$/);
  });

  it('passes env, workdir, args (shell-quoted) and argv mode', async () => {
    await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/sub/x', content: '' });
    expect((await exec({ command: 'echo "$FOO"', env: { FOO: 'bar baz' } })).body.stdout).toBe('bar baz\n');
    expect((await exec({ command: 'pwd', workdir: '/workspace/sub' })).body.stdout).toMatch(/\/workspace\/sub\n$/);
    expect((await exec({ command: 'printf "%s|"', args: ['a b', '$HOME', "it's"] })).body.stdout).toBe("a b|$HOME|it's|");
    expect((await exec({ command: 'printf', args: ['%s-', 'x y', '$(id)'], mode: 'argv' })).body.stdout).toBe('x y-$(id)-');
  });

  it('feeds stdin (sbx extension)', async () => {
    expect((await exec({ command: 'cat', stdin: 'hello' })).body.stdout).toBe('hello');
    expect(
      (await exec({ command: 'wc -c', stdin: Buffer.from([0, 1, 2]).toString('base64'), stdin_encoding: 'base64' })).body.stdout.trim(),
    ).toBe('3');
  });

  it('times out with 408, partial output, and kills the command', async () => {
    const res = await exec({ command: 'echo started; sleep 30', timeout: '500ms' });
    expect(res.status).toBe(408);
    expect(res.body.code).toBe('timeout');
    expect(res.body.stdout).toBe('started\n');
    expect(res.body.exit_code).toBe(124);
  });

  it('rejects a timeout above the maximum with 429 before running', async () => {
    const res = await exec({ command: 'touch /workspace/ran', timeout: '1m' });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('resource_limit');
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/files/stat?path=/workspace/ran`)).status).toBe(404);
  });

  it('validates the request', async () => {
    expect((await exec({})).status).toBe(400);
    expect((await exec({ command: 'true', timeout: 'forever' })).body.message).toMatch(/timeout/);
    expect((await exec({ command: 'true', workdir: 'relative' })).body.message).toMatch(/absolute/);
    expect((await exec({ command: 'true', args: 'x' })).status).toBe(400);
  });
});

describe('streamed exec (NDJSON)', () => {
  it('streams chunks incrementally: the first arrives before the command ends', async () => {
    const started = Date.now();
    const res = await fetch(`${srv.url}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo first; sleep 2; echo second', stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = Date.now() - started;
    expect(firstAt).toBeLessThan(1500);
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const lines = text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({ stream: 'stdout', data: 'first\n' });
    expect(lines.map((l) => l.data).join('')).toBe('first\nsecond\n');
    expect(lines.every((l) => l.stream === 'stdout' || l.stream === 'stderr')).toBe(true);
  });

  it('ends with an exit record only when asked', async () => {
    const res = await exec({ command: 'echo a; echo b >&2; exit 42', stream: true, exit_record: true });
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const last = lines.at(-1);
    expect(last).toMatchObject({ stream: 'exit', data: '', exit_code: 42 });
    expect(
      lines
        .filter((l) => l.stream === 'stderr')
        .map((l) => l.data)
        .join(''),
    ).toBe('b\n');
  });

  it('reports a deadline on stderr with exit 124 and emits exec.timeout', async () => {
    const res = await exec({ command: 'sleep 30', stream: true, exit_record: true, timeout: '300ms' });
    const lines = res.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.some((l) => l.stream === 'stderr' && /timed out/.test(l.data))).toBe(true);
    expect(lines.at(-1)).toMatchObject({ stream: 'exit', exit_code: 124, timed_out: true });
    const kinds = srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type);
    expect(kinds).toContain('exec.timeout');
  });

  it('uses the buffered status codes for limit errors before the stream starts', async () => {
    const res = await exec({ command: 'true', stream: true, timeout: '10m' });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('resource_limit');
  });
});

describe('console logs', () => {
  it('returns exec output lines, honouring lines', async () => {
    await exec({ command: 'for i in 1 2 3 4 5; do echo line$i; done' });
    const all = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs`);
    expect(all.status).toBe(200);
    expect(all.body).toEqual(expect.arrayContaining(['line1', 'line5']));
    const two = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs?lines=2`);
    expect(two.body).toEqual(['line4', 'line5']);
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}/logs?lines=abc`)).status).toBe(400);
  });
});
