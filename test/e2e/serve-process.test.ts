import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, ensureBuilt } from './build.js';

/** `sbx serve` as a real process on the mock provider, its home (and SQLite file) in `home`. */
interface Served {
  child: ChildProcess;
  url: string;
  log: () => string;
  exited: Promise<number | null>;
}

async function serve(home: string): Promise<Served> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: home,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: home,
      SVC_PROVIDERS_DEFAULT: 'mock',
      SVC_PROVIDERS_MOCK_ROOT_DIR: join(home, 'mock'),
      SVC_LOGGING_FORMAT: 'json',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 20_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) return { child, url: m[1]!, log: () => out, exited };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx serve did not start:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : undefined };
}

describe('sbx serve as a process', () => {
  let home: string;
  const children: ChildProcess[] = [];
  const start = async () => {
    const s = await serve(home);
    children.push(s.child);
    return s;
  };

  beforeAll(() => {
    ensureBuilt();
    home = mkdtempSync(join(tmpdir(), 'sbx-serve-proc-'));
  }, 180_000);
  afterAll(() => {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    rmSync(home, { recursive: true, force: true });
  });

  it('logs one line with the URL and the provider', async () => {
    const s = await start();
    const lines = s
      .log()
      .split('\n')
      .filter((l) => /listening/i.test(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain(`sbx `);
    expect(lines[0]).toContain(`listening on ${s.url} (provider: mock, store: sqlite ${join(home, '.sbx', 'sbx.db')})`);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
  });

  it('a killed server restarted on the same database still knows its sandboxes', async () => {
    const first = await start();
    const spawned = await call(first.url, 'POST', '/api/v1/sandboxes', { ttl: '10m', metadata: { keep: 'me' } });
    expect(spawned.status).toBe(201);
    const id: string = spawned.json.id;
    expect(
      (await call(first.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/note.txt', content: 'before the kill' })).status,
    ).toBe(200);
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await start();
    const got = await call(second.url, 'GET', `/api/v1/sandboxes/${id}`);
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ id, state: 'running', metadata: { keep: 'me' }, expires_at: spawned.json.expires_at });
    const exec = await call(second.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'cat note.txt', workdir: '/workspace' });
    expect(exec.json).toMatchObject({ exit_code: 0, stdout: 'before the kill' });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });

  it('SIGTERM lets an in-flight exec finish, then exits 0', async () => {
    const s = await start();
    const { json: sb } = await call(s.url, 'POST', '/api/v1/sandboxes', {});
    const inFlight = call(s.url, 'POST', `/api/v1/sandboxes/${sb.id}/exec`, { command: 'sleep 1; echo finished' });
    await new Promise((r) => setTimeout(r, 300));
    s.child.kill('SIGTERM');
    const r = await inFlight;
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ exit_code: 0, stdout: 'finished\n' });
    expect(await s.exited).toBe(0);
    expect(s.log()).toContain('shutting down: draining in-flight requests');
  });
});
