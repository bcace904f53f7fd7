import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/http.js';
import { waitFor } from '../helpers/wait.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ defaults: { max_ttl: '2h' } });
});
afterAll(async () => srv?.close());

describe('sandbox lifecycle (spec 4.1)', () => {
  it('spawns with server defaults when no body is sent', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes');
    expect(res.status).toBe(201);
    expect(res.body.id).toMatch(/^sb-[a-z0-9]{12}$/);
    expect(res.body).toMatchObject({ state: 'running', provider: 'mock', memory_mb: 512, vcpus: 1, metadata: {}, preview_domain: '' });
    const ttl = Date.parse(res.body.expires_at) - Date.parse(res.body.created_at);
    expect(ttl).toBe(30 * 60_000);
    expect(res.body).not.toHaveProperty('runtime_id');
    // DESIGN §7: the worker that runs it; a lone node is the worker `local`.
    expect(res.body.worker_id).toBe('local');
    const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${res.body.id}`);
    expect(got.body.worker_id).toBe('local');
  });

  it('spawns with explicit fields and lists, gets, extends, destroys', async () => {
    const spawn = await call(srv.url, 'POST', '/api/v1/sandboxes', {
      image: 'img:1',
      memory_mb: 256,
      vcpus: 2,
      ttl: '1h',
      metadata: { team: 'a' },
    });
    expect(spawn.status).toBe(201);
    const id = spawn.body.id;
    expect(spawn.body).toMatchObject({ image: 'img:1', memory_mb: 256, vcpus: 2, metadata: { team: 'a' } });

    const list = await call(srv.url, 'GET', '/api/v1/sandboxes');
    expect(list.status).toBe(200);
    expect(list.body.map((s: { id: string }) => s.id)).toContain(id);

    const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`);
    expect(got.body.id).toBe(id);

    const before = Date.now();
    const ext = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/extend`, { ttl: '90m' });
    expect(ext.status).toBe(200);
    expect(Date.parse(ext.body.expires_at)).toBeGreaterThanOrEqual(before + 90 * 60_000 - 1000);

    const del = await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`);
    expect(del.status).toBe(200);
    expect(del.body).toEqual({ status: 'destroyed' });
    // idempotent
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`)).body).toEqual({ status: 'destroyed' });
    const gone = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`);
    expect(gone.status).toBe(404);
    expect(gone.body).toEqual({ code: 'not_found', message: expect.stringContaining(id) });
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).body.map((s: { id: string }) => s.id)).not.toContain(id);
    expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' })).status).toBe(404);
  });

  it('rejects bad input with {code, message}', async () => {
    const cases: Array<[unknown, RegExp]> = [
      ['{"image":', /^malformed JSON body: (?!malformed)/],
      [{ memory_mb: 'big' }, /memory_mb/],
      [{ memory_mb: 0 }, /memory_mb/],
      [{ vcpus: -1 }, /vcpus/],
      [{ ttl: 'soon' }, /ttl/],
      [{ metadata: { a: 1 } }, /metadata/],
      [{ imgae: 'x' }, /unknown field "imgae"/],
      [{ provider: 'nope' }, /unknown provider/],
    ];
    for (const [body, msg] of cases) {
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toMatch(msg);
    }
  });

  it('enforces max_ttl with 429 resource_limit', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '3h' });
    expect(res.status).toBe(429);
    expect(res.body.code).toBe('resource_limit');
    expect(res.body.message).toMatch(/2h0m0s/);
  });

  it('rejects a TTL too long to represent with 400 before any runtime exists, on spawn and extend', async () => {
    const open = await startTestServer({ defaults: { max_ttl: '0s' } });
    try {
      const mockRoot = join(open.dir, 'mock');
      const runtimes = () => (existsSync(mockRoot) ? readdirSync(mockRoot) : []);
      for (const ttl of ['9999999999999h', '876001h']) {
        const res = await call(open.url, 'POST', '/api/v1/sandboxes', { ttl });
        expect(res.status, ttl).toBe(400);
        expect(res.body).toEqual({
          code: 'bad_request',
          message: `ttl: duration "${ttl}" is too long (the maximum is 876000h, 100 years)`,
        });
      }
      expect(runtimes()).toEqual([]);
      expect((await call(open.url, 'GET', '/api/v1/sandboxes')).body).toEqual([]);

      // Up to the bound it works, with no max_ttl to stop it.
      const long = await call(open.url, 'POST', '/api/v1/sandboxes', { ttl: '876000h' });
      expect(long.status).toBe(201);
      expect(Date.parse(long.body.expires_at) - Date.parse(long.body.created_at)).toBe(876_000 * 3_600_000);
      const id = long.body.id as string;
      expect(runtimes()).toEqual([id]);

      const ext = await call(open.url, 'POST', `/api/v1/sandboxes/${id}/extend`, { ttl: '9999999999999h' });
      expect(ext.status).toBe(400);
      expect(ext.body).toEqual({
        code: 'bad_request',
        message: 'ttl: duration "9999999999999h" is too long (the maximum is 876000h, 100 years)',
      });
      expect((await call(open.url, 'GET', `/api/v1/sandboxes/${id}`)).body.expires_at).toBe(long.body.expires_at);
      expect((await call(open.url, 'DELETE', `/api/v1/sandboxes/${id}`)).status).toBe(200);
      expect(runtimes()).toEqual([]);
    } finally {
      await open.close();
    }
  });

  it('404 for unknown sandbox on every sandbox route', async () => {
    for (const [m, p, b] of [
      ['GET', '/api/v1/sandboxes/sb-nope'],
      ['DELETE', '/api/v1/sandboxes/sb-nope'],
      ['POST', '/api/v1/sandboxes/sb-nope/extend', { ttl: '1m' }],
      ['POST', '/api/v1/sandboxes/sb-nope/exec', { command: 'true' }],
      ['GET', '/api/v1/sandboxes/sb-nope/logs'],
      ['GET', '/api/v1/sandboxes/sb-nope/files?path=/x'],
    ] as Array<[string, string, unknown?]>) {
      const res = await call(srv.url, m, p, b);
      expect(res.status, `${m} ${p}`).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
  });

  it('prunes expired sandboxes and hides them at once', async () => {
    const a = (await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '1s' })).body.id;
    // Hidden at once when its TTL passes (before any reaper pass).
    await waitFor('the sandbox expires', async () => (await call(srv.url, 'GET', `/api/v1/sandboxes/${a}`)).status === 404, 5_000, 50);
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${a}`)).status).toBe(404);
    const res = await call(srv.url, 'DELETE', '/api/v1/sandboxes');
    expect(res.status).toBe(200);
    expect(res.body.pruned).toBeGreaterThanOrEqual(1);
    expect((await call(srv.url, 'DELETE', '/api/v1/sandboxes')).body).toEqual({ pruned: 0 });
  });

  it('the reaper tears down expired sandboxes: runtime gone, record destroyed, event published', async () => {
    const { sandboxes, store, bus } = srv.plane.deps;
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '1s' })).body.id as string;
    const keep = (await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' })).body.id as string;
    const runtimeDir = join(srv.dir, 'mock', id);
    expect(existsSync(runtimeDir)).toBe(true);
    await waitFor('the sandbox expires', async () => (await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`)).status === 404, 5_000, 50);
    // The server's own 10 s reaper pass may have come first; either way exactly one pass did it.
    expect([0, 1]).toContain(await sandboxes.reap());
    expect(existsSync(runtimeDir)).toBe(false);
    expect((await store.getSandbox(id))?.state).toBe('destroyed');
    expect((await store.getSandbox(keep))?.state).toBe('running');
    expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id })).toEqual([
      expect.objectContaining({ data: { reason: 'expired' } }),
    ]);
    expect(await sandboxes.reap()).toBe(0);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${keep}`);
  });

  it('answers unknown routes 404 and wrong methods 405 as JSON, echoes X-Request-ID', async () => {
    const nf = await call(srv.url, 'GET', '/api/v1/nope');
    expect(nf.status).toBe(404);
    expect(nf.body.code).toBe('not_found');
    const na = await call(srv.url, 'PATCH', '/api/v1/sandboxes');
    expect(na.status).toBe(405);
    expect(na.body.code).toBe('method_not_allowed');
    expect(na.headers.get('allow')).toContain('GET');
    const rid = await call(srv.url, 'GET', '/api/v1/health', undefined, { 'X-Request-ID': 'trace-123' });
    expect(rid.headers.get('x-request-id')).toBe('trace-123');
    const gen = await call(srv.url, 'GET', '/api/v1/health');
    expect(gen.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers an oversized body with 413 and keeps serving', async () => {
    const small = await startTestServer({ server: { body_limit_mb: 0.01 } });
    try {
      const res = await call(small.url, 'POST', '/api/v1/sandboxes', { metadata: { big: 'x'.repeat(20_000) } });
      expect(res.status).toBe(413);
      expect(res.body.code).toBe('payload_too_large');
      expect((await call(small.url, 'GET', '/api/v1/live')).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});
