import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { call } from '../helpers/http.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => srv?.close());

describe('templates (spec 4.3)', () => {
  it('creates, conflicts, lists, gets, updates, spawns with overrides, deletes', async () => {
    const c = await call(srv.url, 'POST', '/api/v1/templates', {
      name: 'py',
      image: 'python:3',
      memory_mb: 256,
      ttl: '10m',
      metadata: { kind: 'py' },
    });
    expect(c.status).toBe(201);
    expect(c.body).toMatchObject({ name: 'py', image: 'python:3', memory_mb: 256, ttl: '10m', metadata: { kind: 'py' } });
    // Every field of the template object is present; unset ones are null (DESIGN.md §3).
    const ALL = [
      'auto_pause',
      'created_at',
      'egress',
      'image',
      'memory_mb',
      'metadata',
      'name',
      'network',
      'on_expire',
      'provider',
      'secrets',
      'snapshot',
      'ttl',
      'updated_at',
      'vcpus',
      'volumes',
      'warm',
    ];
    expect(Object.keys(c.body).sort()).toEqual(ALL);
    expect(c.body).toMatchObject({ vcpus: null, provider: null, network: null, auto_pause: null, on_expire: null });
    const dup = await call(srv.url, 'POST', '/api/v1/templates', { name: 'py' });
    expect(dup.status).toBe(409);
    expect(dup.body.code).toBe('conflict');
    const bare = await call(srv.url, 'POST', '/api/v1/templates', { name: 'a-first' });
    expect(Object.keys(bare.body).sort()).toEqual(ALL);
    expect(bare.body).toMatchObject({
      name: 'a-first',
      image: null,
      memory_mb: null,
      vcpus: null,
      ttl: null,
      provider: null,
      metadata: {},
    });
    const listed = await call(srv.url, 'GET', '/api/v1/templates');
    expect(listed.body.map((t: { name: string }) => t.name)).toEqual(['a-first', 'py']);
    expect(listed.body.every((t: object) => Object.keys(t).sort().join() === ALL.join())).toBe(true);
    const got = (await call(srv.url, 'GET', '/api/v1/templates/a-first')).body;
    expect(got).toMatchObject({ name: 'a-first', image: null, memory_mb: null, vcpus: null, ttl: null, provider: null });
    expect(Object.keys(got).sort()).toEqual(ALL);
    expect((await call(srv.url, 'GET', '/api/v1/templates/py')).body.image).toBe('python:3');
    expect((await call(srv.url, 'GET', '/api/v1/templates/none')).status).toBe(404);

    const up = await call(srv.url, 'PUT', '/api/v1/templates/py', { image: 'python:3.12', vcpus: 2, metadata: { kind: 'py' } });
    expect(up.status).toBe(200);
    expect(up.body).toMatchObject({ name: 'py', image: 'python:3.12', vcpus: 2 });
    // A replace clears what it does not set: null again.
    expect(up.body).toMatchObject({ memory_mb: null, provider: null, ttl: null });
    expect((await call(srv.url, 'PUT', '/api/v1/templates/none', { image: 'x' })).status).toBe(404);

    const sp = await call(srv.url, 'POST', '/api/v1/templates/py/spawn', { ttl: '5m', metadata: { extra: '1' } });
    expect(sp.status).toBe(201);
    expect(sp.body).toMatchObject({ image: 'python:3.12', vcpus: 2, memory_mb: 512, metadata: { kind: 'py', extra: '1' }, template: 'py' });
    expect(Date.parse(sp.body.expires_at) - Date.parse(sp.body.created_at)).toBe(5 * 60_000);
    expect((await call(srv.url, 'POST', '/api/v1/templates/none/spawn')).status).toBe(404);

    expect((await call(srv.url, 'DELETE', '/api/v1/templates/py')).body).toEqual({ status: 'deleted' });
    expect((await call(srv.url, 'DELETE', '/api/v1/templates/py')).status).toBe(404);
  });

  it('validates template input', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/templates', { image: 'x' })).status).toBe(400);
    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 'bad name' })).status).toBe(400);
    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 't', ttl: 'x' })).status).toBe(400);
    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 't', provider: 'nope' })).status).toBe(400);
  });

  it('bounds integer fields by the 32-bit store columns: 400, not a store error', async () => {
    for (const field of ['memory_mb', 'vcpus']) {
      const tooBig = await call(srv.url, 'POST', '/api/v1/templates', { name: `big-${field}`, [field]: 2_147_483_648 });
      expect(tooBig.status, field).toBe(400);
      expect(tooBig.body.code).toBe('bad_request');
      expect(tooBig.body.message).toMatch(new RegExp(`${field}.*2147483647`));
      const zero = await call(srv.url, 'POST', '/api/v1/templates', { name: `zero-${field}`, [field]: 0 });
      expect(zero.status, field).toBe(400);
      const max = await call(srv.url, 'POST', '/api/v1/templates', { name: `max-${field}`, [field]: 2_147_483_647 });
      expect(max.status, field).toBe(201);
      expect(max.body[field]).toBe(2_147_483_647);
      const up = await call(srv.url, 'PUT', `/api/v1/templates/max-${field}`, { [field]: 2_147_483_648 });
      expect(up.status, field).toBe(400);
      await call(srv.url, 'DELETE', `/api/v1/templates/max-${field}`);
    }
  });
});

describe('providers, workers, system (spec 4.5–4.8)', () => {
  it('lists providers with health and capabilities', async () => {
    const res = await call(srv.url, 'GET', '/api/v1/providers');
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toMatchObject({
      name: 'mock',
      healthy: true,
      default: true,
      capabilities: expect.arrayContaining(['spawn', 'exec', 'files']),
    });
    expect(typeof res.body[0].latency_ms).toBe('number');
    expect(Date.parse(res.body[0].last_checked)).not.toBeNaN();
    const d = await call(srv.url, 'GET', '/api/v1/providers/mock');
    expect(d.body).toMatchObject({ name: 'mock', healthy: true, default: true, health: { name: 'mock' } });
    expect(typeof d.body.sandbox_count).toBe('number');
    expect(d.body.config).toHaveProperty('runtime');
    expect((await call(srv.url, 'GET', '/api/v1/providers/zzz')).status).toBe(404);
    expect((await call(srv.url, 'POST', '/api/v1/providers/test')).body).toEqual({ mock: true });
  });

  it('lists the local worker', async () => {
    const res = await call(srv.url, 'GET', '/api/v1/workers');
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toMatchObject({ id: 'local', status: 'online', stale: false, providers: ['mock'] });
    expect(res.body[0].capabilities).toEqual(expect.arrayContaining(['api', 'single_node', 'spawn', 'exec', 'files']));
    expect((await call(srv.url, 'GET', '/api/v1/workers/local')).body.id).toBe('local');
    expect((await call(srv.url, 'GET', '/api/v1/workers/nope')).status).toBe(404);
  });

  it('answers health, live, ready, snapshots, pool', async () => {
    const h = await call(srv.url, 'GET', '/api/v1/health');
    expect(h.body).toMatchObject({ status: 'ok', version: expect.stringMatching(/^\d+\.\d+\.\d+/) });
    expect(h.body.uptime).toMatch(/s$/);
    expect((await call(srv.url, 'GET', '/api/v1/live')).body.status).toBe('alive');
    const r = await call(srv.url, 'GET', '/api/v1/ready');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'ready', ready_providers: 1, total_providers: 1 });
    // Snapshots (DESIGN.md §10): none yet, then the one taken, as its summary.
    expect((await call(srv.url, 'GET', '/api/v1/snapshots')).body).toEqual([]);
    const sb = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    const taken = await call(srv.url, 'POST', `/api/v1/sandboxes/${sb.body.id}/snapshot`, { name: 'sys-snap' });
    expect(taken.status).toBe(201);
    const listed = (await call(srv.url, 'GET', '/api/v1/snapshots')).body;
    expect(listed).toEqual([
      {
        name: 'sys-snap',
        image: 'sbx-snapshot/sys-snap',
        kernel: null,
        size_bytes: expect.any(Number),
        created_at: taken.body.created_at,
        provider: 'mock',
      },
    ]);
    expect(Date.parse(listed[0].created_at)).toBeGreaterThanOrEqual(Date.parse(sb.body.created_at));
    expect((await call(srv.url, 'GET', '/api/v1/pool/status')).body).toEqual({ enabled: false });
  });
});
