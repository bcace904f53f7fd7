/** `sbx files watch ID:/path` against a real server (mock provider): human lines, --json, refusals, the end with the sandbox. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => server?.close());

const spawn = async () => {
  const id = (await sbx(['spawn'])).stdout.trim();
  await call(server.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
  return id;
};
/** Waits (bounded) until the watch is in place on the server. */
const watching = async (id: string, n = 1) => {
  const deadline = Date.now() + 10_000;
  while (server.plane.deps.files.watcher.count(id) < n && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(server.plane.deps.files.watcher.count(id)).toBe(n);
};

describe('sbx files watch', () => {
  it('prints one line per change (a rename as old -> new) until the sandbox goes, then exits 0', async () => {
    const id = await spawn();
    const run = sbx(['files', 'watch', `${id}:/w`]);
    await watching(id);
    await call(server.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: "sh -c 'echo a > x; mv x y; rm y'", workdir: '/w' });
    const deadline = Date.now() + 10_000;
    while (server.plane.deps.files.watcher.count(id) > 0 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      await call(server.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    }
    const r = await run;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('create /w/x\nwrite /w/x\nrename /w/x -> /w/y\nremove /w/y\n');
  });

  it('--json prints the events as NDJSON; --no-recursive skips subdirectories; Ctrl-C ends it', async () => {
    const id = await spawn();
    const ac = new AbortController();
    const run = sbx(['files', 'watch', '--json', '--no-recursive', `${id}:/w`], { signal: ac.signal });
    await watching(id);
    await call(server.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: 'mkdir -p d && echo 1 > d/in && echo 2 > top',
      workdir: '/w',
    });
    const until = Date.now() + 10_000;
    while (server.plane.deps.files.watcher.count(id) > 0 && Date.now() < until) {
      await new Promise((r) => setTimeout(r, 200));
      ac.abort();
    }
    const r = await run;
    const events = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; path: string; ts: string });
    expect(events.map((e) => `${e.type} ${e.path}`)).toEqual(['create /w/d', 'create /w/top', 'write /w/top']);
    expect(events.every((e) => typeof e.ts === 'string')).toBe(true);
  });

  it('a missing directory is not found (exit 4); a file argument without a path is a usage error', async () => {
    const id = await spawn();
    const missing = await sbx(['files', 'watch', `${id}:/nope`]);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('no such file or directory');
    expect((await sbx(['files', 'watch', id])).code).toBe(2);
  });
});
