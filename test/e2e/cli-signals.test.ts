/**
 * Ctrl-C and `kill` on the real bin: the signal cancels the command through its context (so it
 * cleans up: the live view gives the cursor back), and the exit code is 128 + the signal number.
 */
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { BIN, ensureBuilt, ROOT } from './build.js';

let server: TestServer;
beforeAll(async () => {
  ensureBuilt();
  server = await startTestServer();
}, 180_000);
afterAll(async () => server?.close());

const home = tempDir('sbx-signals-home-');
const env = () => ({ PATH: process.env.PATH ?? '', HOME: home, SBX_URL: server.url, TERM: 'xterm' });

/** Starts `cmd args…`, resolves once stdout contains `ready`; `done` gives the exit code and output. */
async function start(cmd: string, args: string[], ready: string) {
  const child: ChildProcessWithoutNullStreams = spawn(cmd, args, { cwd: ROOT, env: env(), stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<{ code: number | null; signal: string | null; stdout: string; stderr: string }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })),
  );
  const deadline = Date.now() + 15_000;
  while (!stdout.includes(ready)) {
    if (Date.now() > deadline || child.exitCode !== null) {
      child.kill('SIGKILL');
      throw new Error(`never saw ${JSON.stringify(ready)}: ${stdout} ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, done };
}

async function sandboxWithLine(line: string): Promise<string> {
  const { id } = (await (await fetch(`${server.url}/api/v1/sandboxes`, { method: 'POST' })).json()) as { id: string };
  await fetch(`${server.url}/api/v1/sandboxes/${id}/exec`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ command: `echo ${line}` }),
  });
  return id;
}

describe('signals on the sbx bin', () => {
  it('SIGINT stops `logs -f` with exit 130 and no error line', async () => {
    const id = await sandboxWithLine('before-ctrl-c');
    const { child, done } = await start(process.execPath, [BIN, 'logs', id, '-f'], 'before-ctrl-c\n');
    child.kill('SIGINT');
    const r = await done;
    expect(r.signal).toBeNull();
    expect(r.code).toBe(130);
    expect(r.stdout).toBe('before-ctrl-c\n');
    expect(r.stderr).toBe('');
  });

  it('SIGTERM stops it with exit 143', async () => {
    const id = await sandboxWithLine('before-term');
    const { child, done } = await start(process.execPath, [BIN, 'logs', id, '-f'], 'before-term\n');
    child.kill('SIGTERM');
    const r = await done;
    expect(r.code).toBe(143);
    expect(r.stderr).toBe('');
  });

  it('SIGINT during `sbx exec` kills the remote command and exits 130 without an error line', async () => {
    const id = await sandboxWithLine('x');
    // A duration no other test uses, since mock sandboxes share the host's process table.
    const nap = `${40 + Math.floor(Math.random() * 1000)}.25`;
    const { child, done } = await start(process.execPath, [BIN, 'exec', '--sh', id, `echo started; sleep ${nap}; echo never`], 'started\n');
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    expect(r.stdout).toBe('started\n');
    expect(r.stderr).toBe('');
    // The command is gone in the sandbox: soon no such `sleep` is left (the kill follows the hang-up).
    const running = async () => {
      const ps = await fetch(`${server.url}/api/v1/sandboxes/${id}/exec`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ command: 'ps -o args 2>/dev/null || ps' }),
      });
      return ((await ps.json()) as { stdout: string }).stdout.includes(`sleep ${nap}`);
    };
    const deadline = Date.now() + 5_000;
    while ((await running()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(await running()).toBe(false);
  });

  const hasScript = spawnSync('script', ['-qec', 'true', '/dev/null']).status === 0;
  it.skipIf(!hasScript)('Ctrl-C on a terminal: the live watch view ends, gives the cursor back, exit 130', async () => {
    // `script` gives sbx a pseudo-terminal; ^C typed into it reaches sbx as SIGINT.
    const { child, done } = await start('script', ['-qefc', `${process.execPath} ${BIN} watch`, '/dev/null'], 'watching');
    child.stdin.write('\x03');
    const r = await done;
    expect(r.code).toBe(130);
    const end = r.stdout.slice(r.stdout.lastIndexOf('watching'));
    expect(end).toContain('\x1b[?25h');
    expect(r.stdout).not.toContain('sbx:');
  });
});
