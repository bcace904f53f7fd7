import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LABEL_SANDBOX } from '../../src/adapters/providers/docker/containers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { DOCKER_SKIP, dockerTitle, EngineTap, requireEngine, SOCKET, TEST_IMAGE } from './engine.js';

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(120_000),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = text; // a file read answers raw bytes
  }
  return { status: res.status, json };
}

const SANDBOXES = 10;
const OPS_PER_SANDBOX = 15;

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('operations racing a destroy on docker (issue 12.3)'), () => {
  let docker: Docker;
  let srv: TestServer;

  beforeAll(async () => {
    docker = await requireEngine();
    srv = await startTestServer({
      providers: { default: 'docker', docker: { socket_path: SOCKET } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
  });
  afterAll(async () => {
    if (!srv) return;
    const left = await call(srv.url, 'GET', '/api/v1/sandboxes');
    for (const s of (left.json as Array<{ id: string }>) ?? []) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
    await srv.close();
  });

  it('150 operations racing 10 destroys: no 5xx, every sandbox ends destroyed, no container left', async () => {
    const ids: string[] = [];
    for (let i = 0; i < SANDBOXES; i++) {
      const r = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
      expect(r.status).toBe(201);
      ids.push(r.json.id);
      // Something to read back while the destroy runs.
      expect(
        (await call(srv.url, 'POST', `/api/v1/sandboxes/${r.json.id}/files`, { path: '/workspace/seed.txt', content: 'seed' })).status,
      ).toBe(200);
    }
    const ops = (id: string, n: number): Promise<{ what: string; status: number; json: any }> => {
      const base = `/api/v1/sandboxes/${id}`;
      const kinds: Array<[string, () => Promise<{ status: number; json: any }>]> = [
        ['exec', () => call(srv.url, 'POST', `${base}/exec`, { command: 'echo hi; sleep 0.2; echo bye' })],
        ['write', () => call(srv.url, 'POST', `${base}/files`, { path: `/workspace/f${n}.txt`, content: 'x'.repeat(1000) })],
        ['read', () => call(srv.url, 'GET', `${base}/files?path=/workspace/seed.txt`)],
        ['logs', () => call(srv.url, 'GET', `${base}/logs`)],
        ['extend', () => call(srv.url, 'POST', `${base}/extend`, { ttl: '20m' })],
        ['get', () => call(srv.url, 'GET', base)],
      ];
      const [what, run] = kinds[n % kinds.length]!;
      return run().then((r) => ({ what, ...r }));
    };
    const results: Array<{ what: string; status: number; json: any }> = [];
    const destroys: Array<{ status: number; json: any }> = [];
    await Promise.all(
      ids.map(async (id, i) => {
        const running: Promise<void>[] = [];
        for (let n = 0; n < OPS_PER_SANDBOX; n++) {
          running.push(ops(id, n + i).then((r) => void results.push(r)));
          // The destroy lands in the middle of the operations, at a different point per sandbox.
          if (n === 3 + (i % 8)) running.push(call(srv.url, 'DELETE', `/api/v1/sandboxes/${id}`).then((r) => void destroys.push(r)));
          await new Promise((r) => setTimeout(r, 5 + (i % 3) * 5));
        }
        await Promise.all(running);
      }),
    );

    expect(results).toHaveLength(SANDBOXES * OPS_PER_SANDBOX);
    const bad = results.filter((r) => r.status >= 500 || ![200, 404, 409].includes(r.status));
    expect(bad.map((r) => `${r.what} ${r.status} ${JSON.stringify(r.json)}`)).toEqual([]);
    // Every refusal is the spec's body, and a lost race is not_found (or conflict), nothing else.
    for (const r of results.filter((x) => x.status !== 200)) {
      expect(Object.keys(r.json).sort()).toEqual(['code', 'message']);
      expect(['not_found', 'conflict']).toContain(r.json.code);
    }
    expect(destroys.map((d) => d.status)).toEqual(Array(SANDBOXES).fill(200));

    const { store, bus } = srv.plane.deps;
    for (const id of ids) {
      expect((await store.getSandbox(id))!.state, id).toBe('destroyed');
      // Straight to destroyed: never through `error`.
      expect(bus.since(0, { types: ['sandbox.error'], sandbox_id: id })).toEqual([]);
      expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id })).toHaveLength(1);
    }
    // Asked of the engine itself: no container of these sandboxes, running or not.
    const left = await docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX] } });
    expect(left.filter((c) => ids.includes(c.Labels?.[LABEL_SANDBOX] ?? ''))).toEqual([]);
    // Later operations on them answer 404.
    expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${ids[0]}/exec`, { command: 'true' })).status).toBe(404);
  }, 240_000);

  it('a destroy the engine cannot do answers an error, never leaves `error`, and the reaper finishes it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-destroy-retry-'));
    const relay = new EngineTap(dir);
    await relay.open();
    const tapped = await startTestServer({
      providers: { default: 'docker', docker: { socket_path: relay.path } },
      defaults: { image: TEST_IMAGE, memory_mb: 64 },
    });
    try {
      const { store, bus, sandboxes } = tapped.plane.deps;
      const { json: sb } = await call(tapped.url, 'POST', '/api/v1/sandboxes', {});
      const id: string = sb.id;
      await relay.close();
      const del = await call(tapped.url, 'DELETE', `/api/v1/sandboxes/${id}`);
      // Every try failed (the engine is gone): the caller hears it, in the DESIGN pair for it.
      expect(del.status).toBe(500);
      expect(del.json.code).toBe('provider_error');
      const rec = (await store.getSandbox(id))!;
      expect(rec.state).toBe('running');
      // Left to the reaper: past its TTL now, so gone for every read at once.
      expect(Date.parse(rec.expires_at)).toBeLessThanOrEqual(Date.now());
      expect((await call(tapped.url, 'GET', `/api/v1/sandboxes/${id}`)).status).toBe(404);
      expect((await docker.getContainer(`sbx-${id}`).inspect()).State.Running).toBe(true);

      await relay.open();
      expect(await sandboxes.reap()).toBe(1);
      expect((await store.getSandbox(id))!.state).toBe('destroyed');
      expect(bus.since(0, { types: ['sandbox.error'], sandbox_id: id })).toEqual([]);
      expect(bus.since(0, { types: ['sandbox.destroyed'], sandbox_id: id }).map((e) => e.data)).toEqual([{ reason: 'requested' }]);
      const left = await docker.listContainers({ all: true, filters: { label: [LABEL_SANDBOX] } });
      expect(left.filter((c) => c.Labels?.[LABEL_SANDBOX] === id)).toEqual([]);
    } finally {
      await relay.open().catch(() => undefined);
      await tapped.close();
      await relay.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
