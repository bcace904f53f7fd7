/**
 * `sbx mcp` end to end: the MCP SDK's own Client over stdio spawns the built `bin/sbx.js mcp`
 * against a real control plane (mock provider) and drives every tool the way an agent would.
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ROOT } from '../e2e/build.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';

/** dist/ must hold the mcp command (a dist built before it existed is rebuilt). */
function ensureMcpBuilt(): void {
  if (existsSync(join(ROOT, 'dist', 'transports', 'mcp', 'server.js')) && existsSync(join(ROOT, 'dist', 'cli.js'))) return;
  execFileSync(process.execPath, [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'], {
    cwd: ROOT,
    stdio: 'pipe',
  });
}

interface Agent {
  client: Client;
  stderr: () => string;
  close(): Promise<void>;
}

/** An MCP client connected to `sbx mcp` with these env vars (HOME empty: no client profile). */
async function connect(env: Record<string, string>): Promise<Agent> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: tempDir('sbx-mcp-home-'), ...env },
    stderr: 'pipe',
  });
  let err = '';
  transport.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const client = new Client({ name: 'sbx-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  return { client, stderr: () => err, close: () => client.close() };
}

function textOf(r: CallToolResult): string {
  return r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
}

async function call(agent: Agent, name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  return (await agent.client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A successful call's JSON text. */
async function callJson<T = Record<string, unknown>>(agent: Agent, name: string, args: Record<string, unknown> = {}): Promise<T> {
  const r = await call(agent, name, args);
  expect(r.isError, `${name}: ${textOf(r)}`).toBeFalsy();
  return JSON.parse(textOf(r)) as T;
}

/** A failed call's `{code, message}`. */
async function callError(
  agent: Agent,
  name: string,
  args: Record<string, unknown> = {},
): Promise<{ code?: string; message?: string; text: string }> {
  const r = await call(agent, name, args);
  expect(r.isError, `${name} should fail: ${textOf(r)}`).toBe(true);
  const text = textOf(r);
  try {
    return { ...(JSON.parse(text) as { code: string; message: string }), text };
  } catch {
    return { text };
  }
}

describe('sbx mcp over stdio', () => {
  let server: TestServer;
  let agent: Agent;
  let id: string;

  beforeAll(async () => {
    ensureMcpBuilt();
    server = await startTestServer();
    agent = await connect({ SBX_URL: server.url });
  }, 120_000);

  afterAll(async () => {
    await agent?.close();
    await server?.close();
  });

  it('lists its tools with input schemas, and its resources', async () => {
    const { tools } = await agent.client.listTools();
    const names = tools.map((t) => t.name).sort();
    expect(names).toEqual(
      [
        'destroy',
        'exec',
        'fork',
        'list_files',
        'list_sandboxes',
        'logs',
        'pause',
        'preview_url',
        'process_output',
        'read_file',
        'resume',
        'secrets_list',
        'spawn',
        'start_process',
        'stop_process',
        'templates',
        'write_file',
      ].sort(),
    );
    const exec = tools.find((t) => t.name === 'exec')!;
    expect(exec.inputSchema.required).toEqual(expect.arrayContaining(['sandbox_id', 'command']));
    expect(Object.keys(exec.inputSchema.properties ?? {})).toEqual(expect.arrayContaining(['args', 'workdir', 'env', 'timeout']));
    const spawn = tools.find((t) => t.name === 'spawn')!;
    expect(Object.keys(spawn.inputSchema.properties ?? {}).sort()).toEqual([
      'image',
      'memory_mb',
      'metadata',
      'provider',
      'template',
      'ttl',
      'vcpus',
    ]);
    expect(spawn.inputSchema.required ?? []).toEqual([]);
    for (const t of tools) expect(t.description, t.name).toBeTruthy();
    const { resourceTemplates } = await agent.client.listResourceTemplates();
    expect(resourceTemplates.map((r) => r.uriTemplate)).toContain('sbx://sandboxes/{sandbox_id}/files{+path}');
  });

  it('spawns a sandbox and lists it', async () => {
    const box = await callJson<{ id: string; state: string }>(agent, 'spawn', { ttl: '10m', metadata: { by: 'mcp-test' } });
    expect(box.id).toMatch(/^sb-/);
    expect(box.state).toBe('running');
    id = box.id;
    const list = await callJson<{ sandboxes: Array<{ id: string; metadata: Record<string, string> }> }>(agent, 'list_sandboxes');
    expect(list.sandboxes.find((s) => s.id === id)?.metadata).toEqual({ by: 'mcp-test' });
  });

  it('exec: output, exit code (non-zero is a normal result), argv mode, env and workdir', async () => {
    const r = await call(agent, 'exec', { sandbox_id: id, command: 'echo hello; echo oops >&2; exit 3' });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({
      exit_code: 3,
      stdout: 'hello\n',
      stderr: 'oops\n',
      timed_out: false,
      stdout_dropped_bytes: 0,
    });
    expect(textOf(r)).toContain('exit_code: 3');
    expect(textOf(r)).toContain('hello');

    const argv = await call(agent, 'exec', { sandbox_id: id, command: 'printf', args: ['%s|%s', 'a b', '$HOME'] });
    expect(argv.structuredContent).toMatchObject({ exit_code: 0, stdout: 'a b|$HOME' });

    const env = await call(agent, 'exec', {
      sandbox_id: id,
      command: 'echo "$GREETING"; pwd',
      env: { GREETING: 'hi there' },
      workdir: '/tmp',
    });
    expect(env.structuredContent).toMatchObject({ exit_code: 0 });
    expect(String(env.structuredContent!.stdout)).toMatch(/^hi there\n.*tmp\n$/);
  });

  it('exec: big output is cut in the middle with a note saying how much was dropped', async () => {
    const r = await call(agent, 'exec', { sandbox_id: id, command: "printf 'START'; head -c 200000 /dev/zero | tr '\\0' x; printf 'END'" });
    expect(r.isError).toBeFalsy();
    const s = r.structuredContent as Record<string, unknown>;
    expect(s.exit_code).toBe(0);
    expect(s.stdout_bytes).toBe(200_008);
    expect(s.stdout_dropped_bytes).toBe(200_008 - 64 * 1024);
    expect(String(s.stdout).startsWith('START')).toBe(true);
    expect(String(s.stdout).endsWith('END')).toBe(true);
    expect(String(s.stdout)).toContain(`[sbx: ${200_008 - 64 * 1024} bytes of stdout dropped here]`);
    expect((s.notes as string[]).join(' ')).toContain(`${200_008 - 64 * 1024} bytes in the middle were dropped`);
    expect(textOf(r)).toContain('bytes in the middle were dropped');
  });

  it('exec: a timeout kills the command and answers exit code 124', async () => {
    const r = await call(agent, 'exec', { sandbox_id: id, command: 'echo before; sleep 20', timeout: '1s' });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ exit_code: 124, timed_out: true, stdout: 'before\n' });
  });

  it('exec: a call the agent cancels kills the command', async () => {
    await expect(
      agent.client.callTool({ name: 'exec', arguments: { sandbox_id: id, command: 'sleep 2; echo late > marker.txt' } }, undefined, {
        timeout: 500,
      }),
    ).rejects.toThrow(/timed out/i);
    await new Promise((r) => setTimeout(r, 3000));
    expect((await callError(agent, 'read_file', { sandbox_id: id, path: '/workspace/marker.txt' })).code).toBe('not_found');
    // The same command not cancelled does write it (its default workdir is /workspace).
    await call(agent, 'exec', { sandbox_id: id, command: 'echo made by exec > made.txt' });
    const made = await callJson<{ content: string }>(agent, 'read_file', { sandbox_id: id, path: '/workspace/made.txt' });
    expect(made.content).toBe('made by exec\n');
  });

  it('write_file and read_file: text, and binary byte-exact through base64', async () => {
    expect(await callJson(agent, 'write_file', { sandbox_id: id, path: '/workspace/hello.txt', content: 'héllo\nwörld\n' })).toMatchObject({
      status: 'written',
    });
    expect(await callJson(agent, 'read_file', { sandbox_id: id, path: '/workspace/hello.txt' })).toEqual({
      path: '/workspace/hello.txt',
      size: Buffer.byteLength('héllo\nwörld\n'),
      encoding: 'utf8',
      content: 'héllo\nwörld\n',
    });

    const bytes = randomBytes(70_000);
    bytes[0] = 0xff; // never valid UTF-8
    await callJson(agent, 'write_file', {
      sandbox_id: id,
      path: '/workspace/bin/data.bin',
      content: bytes.toString('base64'),
      encoding: 'base64',
      mode: '0600',
    });
    const back = await callJson<{ encoding: string; content: string; size: number }>(agent, 'read_file', {
      sandbox_id: id,
      path: '/workspace/bin/data.bin',
    });
    expect(back.encoding).toBe('base64');
    expect(back.size).toBe(bytes.length);
    expect(Buffer.from(back.content, 'base64').equals(bytes)).toBe(true);

    const bad = await callError(agent, 'write_file', { sandbox_id: id, path: '/workspace/x', content: 'not base64!', encoding: 'base64' });
    expect(bad.code).toBe('bad_request');
  });

  it('list_files lists a directory', async () => {
    const r = await callJson<{ files: Array<{ name: string; is_dir?: boolean; size: number; mode: string }> }>(agent, 'list_files', {
      sandbox_id: id,
      path: '/workspace/bin',
    });
    const f = r.files.find((x) => x.name === 'data.bin');
    expect(f).toMatchObject({ size: 70_000, mode: '0600' });
  });

  it('reads a file as a resource: text, and binary as a blob', async () => {
    const text = await agent.client.readResource({ uri: `sbx://sandboxes/${id}/files/workspace/hello.txt` });
    expect(text.contents[0]).toMatchObject({ mimeType: 'text/plain', text: 'héllo\nwörld\n' });
    const blob = await agent.client.readResource({ uri: `sbx://sandboxes/${id}/files/workspace/bin/data.bin` });
    expect(Buffer.from(String((blob.contents[0] as { blob: string }).blob), 'base64').length).toBe(70_000);
    await expect(agent.client.readResource({ uri: `sbx://sandboxes/${id}/files/workspace/missing.txt` })).rejects.toThrow(/not_found/);
    const list = await agent.client.readResource({ uri: 'sbx://sandboxes' });
    expect(String((list.contents[0] as { text: string }).text)).toContain(id);
  });

  it('logs and templates', async () => {
    const logs = await callJson<{ lines: string[] }>(agent, 'logs', { sandbox_id: id, lines: 50 });
    expect(Array.isArray(logs.lines)).toBe(true);
    expect(await callJson(agent, 'templates')).toEqual({ templates: [] });
  });

  it('background processes: start, read output from an offset, stop', async () => {
    const p = await callJson<{ id: string; state: string }>(agent, 'start_process', {
      sandbox_id: id,
      command: 'echo one; echo two; sleep 30',
    });
    expect(p.state).toBe('running');
    let out: { output: string; next_offset: number; state: string } = { output: '', next_offset: 0, state: '' };
    for (let i = 0; i < 50 && !out.output.includes('two'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      out = await callJson(agent, 'process_output', { sandbox_id: id, process_id: p.id });
    }
    expect(out).toMatchObject({ output: 'one\ntwo\n', next_offset: 8, state: 'running' });
    const rest = await callJson<{ output: string }>(agent, 'process_output', { sandbox_id: id, process_id: p.id, offset: 4 });
    expect(rest.output).toBe('two\n');
    const stopped = await callJson<{ state: string }>(agent, 'stop_process', { sandbox_id: id, process_id: p.id });
    expect(stopped.state).toBe('killed');
  });

  it('preview_url is a clear tool error when the server has no preview domain', async () => {
    const e = await callError(agent, 'preview_url', { sandbox_id: id, port: 8080 });
    expect(e.message).toMatch(/previews are off/);
  });

  it('bad arguments and API failures are tool errors, and the server keeps serving', async () => {
    const missing = await callError(agent, 'exec', { command: 'true' });
    expect(missing.code).toBe('bad_request');
    expect(missing.message).toMatch(/sandbox_id/);
    const badPort = await callError(agent, 'preview_url', { sandbox_id: id, port: 70000 });
    expect(badPort).toMatchObject({ code: 'bad_request', message: expect.stringMatching(/port/) });
    const noTool = await callError(agent, 'format_disk', {});
    expect(noTool.code).toBe('bad_request');
    const unknown = await callError(agent, 'exec', { sandbox_id: 'sb-doesnotexist', command: 'true' });
    expect(unknown.code).toBe('not_found');
    expect(unknown.message).toBeTruthy();
    const noFile = await callError(agent, 'read_file', { sandbox_id: id, path: '/workspace/nope.txt' });
    expect(noFile.code).toBe('not_found');
    const mixed = await callError(agent, 'spawn', { template: 'small', image: 'alpine' });
    expect(mixed.code).toBe('bad_request');
    // Still serving.
    const r = await call(agent, 'exec', { sandbox_id: id, command: 'echo still here' });
    expect(r.structuredContent).toMatchObject({ exit_code: 0, stdout: 'still here\n' });
  });

  it('destroys the sandbox; later calls on it answer not_found', async () => {
    expect(await callJson(agent, 'destroy', { sandbox_id: id })).toEqual({ sandbox_id: id, status: 'destroyed' });
    expect((await callError(agent, 'exec', { sandbox_id: id, command: 'true' })).code).toBe('not_found');
    expect(agent.stderr()).toBe('');
  });
});

describe('sbx mcp with auth on', () => {
  const KEY = 'mcp-secret-key-7f3a9c';
  let server: TestServer;

  beforeAll(async () => {
    ensureMcpBuilt();
    server = await startTestServer({ auth: { api_key: KEY }, server: { preview_domain: 'preview.localhost' } });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
  });

  it('the key from SBX_API_KEY works and never appears in any output', async () => {
    const agent = await connect({ SBX_URL: server.url, SBX_API_KEY: KEY });
    try {
      const outputs: string[] = [];
      const track = async (name: string, args: Record<string, unknown> = {}) => {
        const r = await call(agent, name, args);
        outputs.push(JSON.stringify(r));
        return r;
      };
      const box = JSON.parse(textOf(await track('spawn', {}))) as { id: string };
      expect(box.id).toMatch(/^sb-/);
      // Even a command that prints the key: the server scrubs it from results.
      await track('exec', { sandbox_id: box.id, command: `echo ${KEY}` });
      const exec = await track('exec', { sandbox_id: box.id, command: 'env' });
      expect(exec.isError).toBeFalsy();
      const preview = JSON.parse(textOf(await track('preview_url', { sandbox_id: box.id, port: 3000 }))) as { url: string };
      expect(preview.url).toContain(`3000-${box.id}.preview.localhost`);
      await track('list_sandboxes');
      await track('exec', { sandbox_id: 'sb-nope', command: 'true' });
      await track('destroy', { sandbox_id: box.id });
      for (const o of outputs) expect(o).not.toContain(KEY);
      expect(agent.stderr()).not.toContain(KEY);
    } finally {
      await agent.close();
    }
  });

  it('without the key, calls are tool errors saying unauthorized', async () => {
    const agent = await connect({ SBX_URL: server.url });
    try {
      const e = await callError(agent, 'list_sandboxes');
      expect(e.code).toBe('unauthorized');
    } finally {
      await agent.close();
    }
  });
});

describe('sbx mcp process behaviour', () => {
  beforeAll(() => ensureMcpBuilt(), 120_000);

  it('an unreachable server is a tool error (unavailable), not a crash', async () => {
    const agent = await connect({ SBX_URL: 'http://127.0.0.1:1' });
    try {
      const e = await callError(agent, 'list_sandboxes');
      expect(e.code).toBe('unavailable');
      expect(e.message).toMatch(/cannot reach sbx server/);
      // Still answering.
      expect((await agent.client.listTools()).tools.length).toBeGreaterThan(5);
    } finally {
      await agent.close();
    }
  });

  it('survives a garbage line, prints only protocol frames on stdout, and exits 0 when stdin ends', async () => {
    const child = spawn(process.execPath, [BIN, 'mcp'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: tempDir('sbx-mcp-home-'), SBX_URL: 'http://127.0.0.1:1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    child.stdin.write('this is not json\n');
    const params = { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } };
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params })}\n`);
    for (let i = 0; i < 100 && !out.includes('"id":1'); i++) await new Promise((r) => setTimeout(r, 50));
    child.stdin.end();
    expect(await exited).toBe(0);
    const frames = out.trim().split('\n');
    for (const f of frames) expect(() => JSON.parse(f), f).not.toThrow();
    expect(
      frames.some((f) => (JSON.parse(f) as { id?: number; result?: { serverInfo?: { name: string } } }).result?.serverInfo?.name === 'sbx'),
    ).toBe(true);
  });
});
