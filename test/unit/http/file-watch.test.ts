/**
 * File watch in the unit tier (DESIGN §16): the core rules every provider shares — order, one
 * rename event, write coalescing on the fake clock, the per-sandbox limit (429), the lag bound
 * (overflow), the end on destroy, the path refusals — through `app.inject` over the in-memory
 * provider, whose watch is driven by its own file writes.
 */
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { MAX_LAG_EVENTS, MAX_WATCHES_PER_SANDBOX } from '../../../src/core/sandboxes/watch.js';
import { fakeClock, startUnitPlane, type UnitPlane } from '../../helpers/unit-plane.js';

let u: UnitPlane;
beforeAll(async () => {
  fakeClock();
  u = await startUnitPlane();
});
afterAll(async () => {
  await u?.close();
  vi.useRealTimers();
});

const spawn = async () => {
  const res = await u.req('POST', '/api/v1/sandboxes', {});
  expect(res.status, res.text).toBe(201);
  return res.body.id as string;
};
const write = (id: string, path: string, content = 'x') => u.req('POST', `/api/v1/sandboxes/${id}/files`, { path, content });
const tick = async (n = 20) => {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
};

interface Watch {
  status: number;
  body: string;
  lines: () => Array<Record<string, string>>;
  ended: () => boolean;
  stop: () => void;
}

async function watch(id: string, query: string, headers: Record<string, string> = {}): Promise<Watch> {
  const res = await u.inject({ method: 'GET', url: `/api/v1/sandboxes/${id}/files/watch?${query}`, headers, payloadAsStream: true });
  const stream = res.stream() as Readable;
  let text = '';
  let ended = false;
  stream.on('data', (c: Buffer) => (text += c.toString()));
  stream.on('end', () => (ended = true));
  stream.on('close', () => (ended = true));
  if (res.statusCode !== 200) {
    await new Promise((r) => stream.once('end', r));
  }
  return {
    status: res.statusCode,
    get body() {
      return text;
    },
    lines: () =>
      text
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, string>),
    ended: () => ended,
    stop: () => stream.destroy(),
  };
}

describe('file watch (memory provider)', () => {
  it('reports API writes and an exec’s create, write, rename (one event) and remove, in order', async () => {
    const id = await spawn();
    await u.req('POST', `/api/v1/sandboxes/${id}/exec`, { command: 'mkdir -p /w' });
    const w = await watch(id, 'path=/w');
    expect(w.status).toBe(200);
    expect((await write(id, '/w/api.txt', 'hello')).status).toBe(200);
    const ex = await u.req('POST', `/api/v1/sandboxes/${id}/exec`, { command: "sh -c 'echo a > /w/x; mv /w/x /w/y; rm /w/y'" });
    expect(ex.body.exit_code, ex.text).toBe(0);
    await tick();
    const got = w.lines().map((e) => [e.type, e.path, e.old_path].filter((v) => v !== undefined).join(' '));
    expect(got).toEqual(['create /w/api.txt', 'write /w/api.txt', 'create /w/x', 'write /w/x', 'rename /w/y /w/x', 'remove /w/y']);
    expect(w.lines().every((e) => e.ts === new Date(Date.parse(e.ts)).toISOString())).toBe(true);
    w.stop();
  });

  it('coalesces writes to one path within 50 ms: the first at once, one more when the window closes', async () => {
    const id = await spawn();
    const w = await watch(id, 'path=/workspace');
    for (let i = 0; i < 5; i++) await write(id, '/workspace/hot.txt', `v${i}`);
    await write(id, '/workspace/other.txt');
    await tick();
    const before = w.lines().filter((e) => e.type === 'write');
    expect(before.map((e) => e.path)).toEqual(['/workspace/hot.txt', '/workspace/other.txt']);
    await vi.advanceTimersByTimeAsync(50);
    await tick();
    const after = w.lines().filter((e) => e.type === 'write');
    expect(after.map((e) => e.path)).toEqual(['/workspace/hot.txt', '/workspace/other.txt', '/workspace/hot.txt']);
    // A write and then a removal inside one window: the write goes out before the removal.
    await vi.advanceTimersByTimeAsync(100);
    await write(id, '/workspace/gone.txt');
    await write(id, '/workspace/gone.txt', 'again');
    await u.req('DELETE', `/api/v1/sandboxes/${id}/files?path=/workspace/gone.txt`);
    await tick();
    const tail = w.lines().slice(-4);
    expect(tail.map((e) => `${e.type} ${e.path}`)).toEqual([
      'create /workspace/gone.txt',
      'write /workspace/gone.txt',
      'write /workspace/gone.txt',
      'remove /workspace/gone.txt',
    ]);
    w.stop();
  });

  it('recursive by default (new subdirectories too); recursive=false sees direct entries only', async () => {
    const id = await spawn();
    const deep = await watch(id, 'path=/workspace');
    const flat = await watch(id, 'path=/workspace&recursive=false');
    await u.req('POST', `/api/v1/sandboxes/${id}/exec`, { command: 'mkdir -p /workspace/a/b && echo x > /workspace/a/b/f' });
    await tick();
    expect(deep.lines().map((e) => `${e.type} ${e.path}`)).toEqual([
      'create /workspace/a',
      'create /workspace/a/b',
      'create /workspace/a/b/f',
      'write /workspace/a/b/f',
    ]);
    expect(flat.lines().map((e) => `${e.type} ${e.path}`)).toEqual(['create /workspace/a']);
    deep.stop();
    flat.stop();
  });

  it('SSE with Accept: text/event-stream', async () => {
    const id = await spawn();
    const w = await watch(id, 'path=/tmp', { accept: 'text/event-stream' });
    await write(id, '/tmp/s.txt');
    await tick();
    expect(w.body).toContain(': watching');
    expect(w.body).toMatch(/event: create\ndata: \{"type":"create","path":"\/tmp\/s.txt","ts":"[^"]+"\}\n\n/);
    w.stop();
  });

  it(`the ${MAX_WATCHES_PER_SANDBOX + 1}th watch of a sandbox is 429 resource_limit; the limit is per sandbox`, async () => {
    const id = await spawn();
    const other = await spawn();
    const open: Watch[] = [];
    for (let i = 0; i < MAX_WATCHES_PER_SANDBOX; i++) open.push(await watch(id, 'path=/'));
    expect(open.every((w) => w.status === 200)).toBe(true);
    const ninth = await watch(id, 'path=/');
    expect(ninth.status).toBe(429);
    expect(JSON.parse(ninth.body)).toMatchObject({ code: 'resource_limit' });
    // Another sandbox has its own allowance.
    const elsewhere = await watch(other, 'path=/');
    expect(elsewhere.status).toBe(200);
    expect(u.plane.deps.files.watcher.count(id)).toBe(MAX_WATCHES_PER_SANDBOX);
    // (A client that hangs up frees its place at once: test/http/file-watch.test.ts, on a real socket.)
    await u.req('DELETE', `/api/v1/sandboxes/${id}`);
    await u.req('DELETE', `/api/v1/sandboxes/${other}`);
    await tick();
    expect(u.plane.deps.files.watcher.count(id)).toBe(0);
    expect(open.every((w) => w.ended()) && elsewhere.ended()).toBe(true);
  });

  it('refuses a path outside the sandbox (400), a file (400), a missing path (404), an unknown sandbox (404)', async () => {
    const id = await spawn();
    await write(id, '/workspace/file.txt');
    expect((await watch(id, 'path=/../../etc')).status).toBe(400);
    expect((await watch(id, 'path=relative')).status).toBe(400);
    expect((await watch(id, 'path=/workspace/file.txt')).status).toBe(400);
    const missing = await watch(id, 'path=/nope');
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).code).toBe('not_found');
    expect((await watch('sbx-nope', 'path=/')).status).toBe(404);
    expect(u.plane.deps.files.watcher.count(id)).toBe(0);
  });

  it('a symlink is not followed: neither as the watched path nor inside it', async () => {
    const id = await spawn();
    await u.req('POST', `/api/v1/sandboxes/${id}/exec`, {
      command: 'mkdir -p /outside /w && ln -s /outside /w/link && ln -s /outside /lnk',
    });
    expect((await watch(id, 'path=/lnk')).status).toBe(400);
    const w = await watch(id, 'path=/w');
    await write(id, '/outside/secret.txt');
    await write(id, '/w/link/through.txt');
    await tick();
    expect(w.lines()).toEqual([]);
    w.stop();
  });

  it('destroying the sandbox ends its watch streams', async () => {
    const id = await spawn();
    const a = await watch(id, 'path=/');
    const b = await watch(id, 'path=/tmp', { accept: 'text/event-stream' });
    expect((await u.req('DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    await tick();
    expect(a.ended()).toBe(true);
    expect(b.ended()).toBe(true);
    expect(u.plane.deps.files.watcher.count(id)).toBe(0);
  });

  it(`a consumer ${MAX_LAG_EVENTS} events behind gets overflow and the stream ends`, async () => {
    const id = await spawn();
    const ac = new AbortController();
    const caller = { owner_id: null, admin: true } as never;
    const events = await u.plane.deps.files.watcher.watchFiles(caller, id, '/workspace', { recursive: true }, ac.signal);
    // Nobody reads while the sandbox makes many more changes than the bound.
    for (let i = 0; i < MAX_LAG_EVENTS + 100; i++) await u.provider.writeFile(id, `/workspace/f${i}`, new Uint8Array(), undefined);
    await tick();
    expect(u.plane.deps.files.watcher.count(id)).toBe(0);
    const got: string[] = [];
    for await (const ev of events) got.push(ev.type);
    expect(got.length).toBe(MAX_LAG_EVENTS + 1);
    expect(got.at(-1)).toBe('overflow');
    expect(got.slice(0, -1).every((t) => t === 'create')).toBe(true);
  });
});
