import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomIds } from '../../src/adapters/system/clock-ids.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A real control plane on the mock provider whose log lines are kept, and whose next sandbox id
 * can be chosen (to make the store refuse a spawn after the runtime exists).
 */
let srv: TestServer;
let url: string;
const logs: Array<Record<string, unknown>> = [];
let nextId: string | undefined;

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  const ids = {
    sandboxId: () => {
      const id = nextId ?? randomIds.sandboxId();
      nextId = undefined;
      return id;
    },
    randomId: (n?: number) => randomIds.randomId(n),
  };
  srv = await startTestServer({ logging: { level: 'warn' } }, { logger: pino({ level: 'warn' }, sink), ids });
  url = srv.url;
});
afterAll(async () => srv?.close());

const runtimeDir = (id: string) => join(srv.dir, 'mock', id);

describe('sandbox lifecycle edges', () => {
  it('tears the runtime down when the sandbox cannot be recorded after the provider spawned it', async () => {
    const id = 'sb-collision0000';
    const at = new Date().toISOString();
    await srv.plane.deps.store.insertSandbox({
      id,
      state: 'destroyed',
      provider: 'mock',
      image: 'x',
      memory_mb: 1,
      vcpus: 1,
      created_at: at,
      updated_at: at,
      expires_at: at,
      metadata: {},
      owner_id: null,
      worker_id: 'local',
      runtime_id: null,
      template: null,
    });
    nextId = id;
    const res = await call(url, 'POST', '/api/v1/sandboxes', {});
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ code: 'conflict', message: `sandbox "${id}" already exists` });
    expect(existsSync(join(srv.dir, 'mock'))).toBe(true); // the provider did run
    expect(existsSync(runtimeDir(id))).toBe(false);
    expect((await srv.plane.deps.store.getSandbox(id))!.state).toBe('destroyed');
  });

  it(
    'a sandbox whose provider is not configured here: 503 for every operation, DELETE keeps it, prune and ' +
      'reaper leave it with one warning',
    async () => {
      const { store, sandboxes, bus } = srv.plane.deps;
      const spawned = await call(url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
      expect(spawned.status).toBe(201);
      const id = spawned.body.id as string;
      expect((await call(url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/a.txt', content: 'a' })).status).toBe(200);
      // As after a restart where `auto` no longer finds the engine the sandbox was spawned on.
      await store.updateSandbox(id, { provider: 'docker' });

      const got = await call(url, 'GET', `/api/v1/sandboxes/${id}`);
      expect(got.status).toBe(200);
      expect(got.body).toMatchObject({ id, provider: 'docker', state: 'running' });

      const expected = { code: 'unavailable', message: `sandbox ${id} runs on provider "docker", which is not configured on this server` };
      const ops: Array<[string, string, unknown?]> = [
        ['POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true' }],
        ['POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true', stream: true }],
        ['GET', `/api/v1/sandboxes/${id}/logs`],
        ['POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/b.txt', content: 'b' }],
        ['GET', `/api/v1/sandboxes/${id}/files?path=/workspace/a.txt`],
        ['DELETE', `/api/v1/sandboxes/${id}/files?path=/workspace/a.txt`],
        ['GET', `/api/v1/sandboxes/${id}/files/list?path=/workspace`],
        ['GET', `/api/v1/sandboxes/${id}/files/stat?path=/workspace/a.txt`],
        ['GET', `/api/v1/sandboxes/${id}/files/glob?pattern=/workspace/*`],
        ['POST', `/api/v1/sandboxes/${id}/files/move`, { old_path: '/workspace/a.txt', new_path: '/workspace/c.txt' }],
        ['POST', `/api/v1/sandboxes/${id}/files/chmod`, { path: '/workspace/a.txt', mode: '600' }],
        ['DELETE', `/api/v1/sandboxes/${id}`],
      ];
      for (const [method, path, body] of ops) {
        const res = await call(url, method, path, body);
        expect(res.status, `${method} ${path}`).toBe(503);
        expect(res.body, `${method} ${path}`).toEqual(expected);
      }
      // Nothing was destroyed behind the 503: record and runtime are both still there.
      expect((await store.getSandbox(id))!.state).toBe('running');
      expect(existsSync(join(runtimeDir(id), 'workspace', 'a.txt'))).toBe(true);
      expect((await call(url, 'GET', '/api/v1/sandboxes')).body.map((s: { id: string }) => s.id)).toContain(id);

      // Past its TTL: neither prune nor the reaper can tear it down, so both leave it, warning once.
      await store.updateSandbox(id, { expires_at: new Date(Date.now() - 1000).toISOString() });
      expect((await call(url, 'DELETE', '/api/v1/sandboxes')).body).toEqual({ pruned: 0 });
      expect(await sandboxes.reap()).toBe(0);
      expect(await sandboxes.reap()).toBe(0);
      expect((await call(url, 'DELETE', `/api/v1/sandboxes/${id}`)).body).toEqual(expected);
      expect((await store.getSandbox(id))!.state).toBe('running');
      expect(existsSync(runtimeDir(id))).toBe(true);
      const warnings = logs.filter((l) => l.sandbox_id === id);
      expect(warnings).toEqual([
        expect.objectContaining({
          level: 40,
          provider: 'docker',
          msg: 'sandbox left alone: provider "docker" is not configured on this server; configure it again to reach or destroy its runtime',
        }),
      ]);
      expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id })).toEqual([]);

      // With its provider back, the next reaper pass tears it down as usual.
      await store.updateSandbox(id, { provider: 'mock' });
      expect(await sandboxes.reap()).toBe(1);
      expect(existsSync(runtimeDir(id))).toBe(false);
      expect((await store.getSandbox(id))!.state).toBe('destroyed');
      expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id })).toEqual([
        expect.objectContaining({ data: { reason: 'expired' } }),
      ]);
    },
  );

  it('the reaper tears down a sandbox in error whose runtime is gone, and leaves one whose runtime runs', async () => {
    const { store, sandboxes, bus } = srv.plane.deps;
    const lost = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const alive = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    // The runtime vanishes from outside; the next operation says so and moves the sandbox to `error`.
    rmSync(runtimeDir(lost), { recursive: true, force: true });
    const exec = await call(url, 'POST', `/api/v1/sandboxes/${lost}/exec`, { command: 'true' });
    expect(exec.status).toBeGreaterThanOrEqual(400);
    expect((await store.getSandbox(lost))!.state).toBe('error');
    // An `error` sandbox whose runtime still runs is not the reaper's to judge.
    await store.updateSandbox(alive, { state: 'error' });

    expect(await sandboxes.reap()).toBe(1);
    expect((await store.getSandbox(lost))!.state).toBe('destroyed');
    expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: lost })).toEqual([
      expect.objectContaining({ data: { reason: 'runtime_lost' } }),
    ]);
    expect((await call(url, 'GET', '/api/v1/sandboxes')).body.map((s: { id: string }) => s.id)).not.toContain(lost);
    expect((await store.getSandbox(alive))!.state).toBe('error');
    expect(existsSync(runtimeDir(alive))).toBe(true);
    expect(await sandboxes.reap()).toBe(0);

    await store.updateSandbox(alive, { state: 'running' });
    expect((await call(url, 'DELETE', `/api/v1/sandboxes/${alive}`)).status).toBe(200);
  });

  it('the reaper notices a running sandbox whose runtime vanished with no operation since: error, then destroyed', async () => {
    const { store, sandboxes, bus } = srv.plane.deps;
    const lost = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    const alive = (await call(url, 'POST', '/api/v1/sandboxes', {})).body.id as string;
    rmSync(runtimeDir(lost), { recursive: true, force: true });
    expect((await store.getSandbox(lost))!.state).toBe('running');

    expect(await sandboxes.reap()).toBe(1);
    expect((await store.getSandbox(lost))!.state).toBe('destroyed');
    const events = bus.since(0, { types: ['sandbox.error', 'sandbox.destroyed'], sandbox_id: lost });
    expect(events.map((e) => [e.type, e.data])).toEqual([
      ['sandbox.error', { provider: 'mock', operation: 'reap', reason: 'runtime missing' }],
      ['sandbox.destroyed', { reason: 'runtime_lost' }],
    ]);
    // The live one is left alone, and a second pass finds nothing.
    expect((await store.getSandbox(alive))!.state).toBe('running');
    expect(existsSync(runtimeDir(alive))).toBe(true);
    expect(await sandboxes.reap()).toBe(0);
    expect((await call(url, 'POST', `/api/v1/sandboxes/${alive}/exec`, { command: 'echo ok' })).body).toMatchObject({ exit_code: 0 });
    expect((await call(url, 'DELETE', `/api/v1/sandboxes/${alive}`)).status).toBe(200);
  });
});
