/**
 * The file watch contract (DESIGN §16) every provider's watch must pass through a real server:
 * changes from the file API and from an exec inside, in order, a rename as one event; refusals;
 * symlinks not followed; the per-sandbox limit; the end on destroy.
 */
import { expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import type { ProviderServer } from '../helpers/provider-server.js';
import { brief, openWatch } from '../helpers/watch.js';

export interface WatchContext {
  url: string;
  spawn(): Promise<string>;
  /** Watches open on a sandbox, as the serving node counts them (undefined: not visible from here). */
  count?(id: string): number;
}

/** The contract's view of a fixture server: its URL, spawn, and the watches it counts. */
export const watchTarget = (srv: ProviderServer): WatchContext => ({
  url: srv.url,
  spawn: () => srv.spawn(),
  count: (id) => srv.plane.deps.files.watcher.count(id),
});

const sh = (url: string, id: string, command: string, workdir = '/') =>
  call(url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command, workdir, timeout: '30s' });

export function watchContract(ctx: () => WatchContext): void {
  it('reports an API write and an exec’s create, write, rename (one event) and remove, in order', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    expect((await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' })).status).toBe(200);
    const w = await openWatch(url, id, '/w');
    expect(w.status, JSON.stringify(w.error)).toBe(200);
    expect((await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/api.txt', content: 'hello' })).status).toBe(200);
    await w.until((e) => e.length >= 1);
    const ex = await sh(url, id, "sh -c 'echo a > x; mv x y; rm y'", '/w');
    expect(ex.body.exit_code, JSON.stringify(ex.body)).toBe(0);
    const got = brief(await w.until((e) => e.some((x) => x.type === 'remove')));
    expect(got).toEqual(['write /w/api.txt', 'create /w/x', 'write /w/x', 'rename /w/y /w/x', 'remove /w/y']);
    expect(w.events.every((e) => !Number.isNaN(Date.parse(e.ts)))).toBe(true);
    w.close();
  });

  it('watches new subdirectories (recursive), not with recursive=false', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const deep = await openWatch(url, id, '/w');
    const flat = await openWatch(url, id, '/w', { recursive: false });
    await sh(url, id, 'mkdir -p a/b && echo x > a/b/f', '/w');
    // A file made before its new directory's watch was in place is announced by the scan that follows.
    await deep.until((e) => e.some((x) => x.path === '/w/a/b/f'));
    expect(brief(deep.events).slice(0, 3)).toEqual(['create /w/a', 'create /w/a/b', 'create /w/a/b/f']);
    await sh(url, id, 'echo y >> a/b/f', '/w');
    await deep.until((e) => e.some((x) => x.path === '/w/a/b/f' && x.type === 'write'));
    expect(brief(deep.events)).toContain('write /w/a/b/f');
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/top.txt', content: 'x' });
    await flat.until((e) => e.some((x) => x.path === '/w/top.txt'));
    expect(brief(flat.events)).toEqual(['create /w/a', 'write /w/top.txt']);
    deep.close();
    flat.close();
  });

  it('a new tree filled while its directories are being watched reports each entry created once', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const w = await openWatch(url, id, '/w');
    // Entries land while the agent adds each new directory's watch and scans it: both see them.
    const names = Array.from({ length: 300 }, (_, i) => `t/f${i}`);
    const fill = `mkdir t && touch ${names.join(' ')} && mkdir -p t/a/b/c/d && echo > t/done`;
    expect((await sh(url, id, fill, '/w')).body.exit_code).toBe(0);
    await w.until((e) => e.some((x) => x.path === '/w/t/done'));
    const creates = brief(w.events).filter((e) => e.startsWith('create '));
    const want = ['/w/t', ...names.map((n) => `/w/${n}`), '/w/t/a', '/w/t/a/b', '/w/t/a/b/c', '/w/t/a/b/c/d', '/w/t/done'];
    expect([...creates].sort()).toEqual(want.map((p) => `create ${p}`).sort());
    w.close();
  });

  it('refuses a path outside the sandbox (400), a file (400), a missing directory (404)', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/file.txt', content: 'x' });
    const outside = await openWatch(url, id, '/../../etc');
    expect(outside.status).toBe(400);
    expect(outside.error?.code).toBe('bad_request');
    expect((await openWatch(url, id, '/w/file.txt')).status).toBe(400);
    const missing = await openWatch(url, id, '/w/nope');
    expect(missing.status).toBe(404);
    expect(missing.error?.code).toBe('not_found');
  });

  it('a symlink to / inside is not followed: no events from outside, and it cannot be watched itself', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    expect((await sh(url, id, 'ln -s / root', '/w')).body.exit_code).toBe(0);
    const viaLink = await openWatch(url, id, '/w/root');
    expect(viaLink.status).toBe(400);
    const w = await openWatch(url, id, '/w');
    // Changes outside /w, which a followed link would reach.
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/tmp/outside.txt', content: 'x' });
    await sh(url, id, 'echo y > /tmp/outside2.txt; mkdir -p /tmp/d; echo z > /tmp/d/f');
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/inside.txt', content: 'x' });
    await w.until((e) => e.some((x) => x.path === '/w/inside.txt'));
    expect(brief(w.events)).toEqual(['write /w/inside.txt']);
    w.close();
  });

  it('the 9th watch of a sandbox is 429 resource_limit; a client that hangs up frees its place', async () => {
    const { url, spawn, count } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const open = [];
    for (let i = 0; i < 8; i++) open.push(await openWatch(url, id, '/w'));
    expect(open.map((w) => w.status)).toEqual(Array(8).fill(200));
    const ninth = await openWatch(url, id, '/w');
    expect(ninth.status).toBe(429);
    expect(ninth.error?.code).toBe('resource_limit');
    open.pop()!.close();
    if (count) {
      const deadline = Date.now() + 5000;
      while (count(id) > 7 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(count(id)).toBe(7);
    }
    let again = await openWatch(url, id, '/w');
    for (let i = 0; again.status === 429 && i < 100; i++) {
      await new Promise((r) => setTimeout(r, 50));
      again = await openWatch(url, id, '/w');
    }
    expect(again.status).toBe(200);
    for (const w of [...open, again]) w.close();
  });

  it('destroying the sandbox ends its watch streams', async () => {
    const { url, spawn } = ctx();
    const id = await spawn();
    await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/w/seed', content: '' });
    const a = await openWatch(url, id, '/w');
    const b = await openWatch(url, id, '/');
    expect((await call(url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
    await Promise.all([a.until(() => false), b.until(() => false)]);
    expect([a.ended, b.ended]).toEqual([true, true]);
  });
}
