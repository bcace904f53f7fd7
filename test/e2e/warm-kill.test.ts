/**
 * `kill -9` of `sbx serve` with warm runtimes (DESIGN.md §11): after a restart on the same
 * database the ready ones are adopted, and no runtime is left that nobody knows about.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt } from './build.js';

async function serve(home: string): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: home,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(home, 'mock'),
      SVC_DEFAULTS_WARM: '3',
      SVC_LOGGING_FORMAT: 'json',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) return { child, url: m[1]! };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx serve did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function warm(url: string): Promise<{ ready: number; hits: number }> {
  const d = (await (await fetch(`${url}/api/v1/diagnostics`)).json()) as { warm: Array<{ ready: number; hits: number }> };
  return d.warm[0] ?? { ready: 0, hits: 0 };
}

async function until(url: string, ready: number): Promise<void> {
  const end = Date.now() + 30_000;
  while ((await warm(url)).ready !== ready) {
    if (Date.now() > end) throw new Error(`warm pool never reached ${ready}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('warm runtimes across kill -9', () => {
  let home: string;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    await ensureBuilt();
    home = mkdtempSync(join(tmpdir(), 'sbx-warm-kill-'));
  }, 120_000);
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });

  it('adopts the ready runtimes and leaks none', async () => {
    const first = await serve(home);
    children.push(first.child);
    await until(first.url, 3);
    const live = (await (
      await fetch(`${first.url}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { id: string };
    // Killed while the pool refills the runtime the spawn took.
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    const second = await serve(home);
    children.push(second.child);
    await until(second.url, 3);
    // The live sandbox is still there, and every runtime on disk is the live one or a warm one.
    expect((await fetch(`${second.url}/api/v1/sandboxes/${live.id}`)).status).toBe(200);
    const runtimes = readdirSync(join(home, 'mock')).filter((n) => n.startsWith('sb-'));
    const sb = (await (
      await fetch(`${second.url}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
    ).json()) as { id: string };
    expect((await warm(second.url)).hits).toBe(1);
    expect(runtimes).toContain(sb.id);
    expect(runtimes.length).toBe(4);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
  }, 120_000);
});
