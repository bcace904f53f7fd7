import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SbxEvent } from '../../src/core/events/kinds.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

/** Waits until the spawn queue holds `n` waiters. */
const queued = (srv: TestServer, n: number) =>
  waitFor(
    `${n} spawns queued`,
    () => srv.plane.deps.admission.stats({ ...srv.plane.deps.locator.figures(), owner_quotas: 0 }).spawn_queue_depth === n,
  );

describe('admission in reject mode', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_sandboxes: 3, max_sandboxes_per_owner: 1, max_ttl: '1h' } });
  });
  afterAll(async () => srv?.close());
  afterEach(async () => {
    for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes')).body) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
  });

  it('20 concurrent spawns against max_sandboxes=3 admit exactly 3; the rest get 503', async () => {
    // Twenty owners, so only the global limit can refuse them.
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': `u${i}` })),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(3);
    expect(statuses.filter((s) => s === 503)).toHaveLength(17);
    const denied = results.find((r) => r.status === 503)!;
    expect(denied.body).toMatchObject({ code: 'unavailable', reason: 'max_sandboxes' });
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).body).toHaveLength(3);
    const limits = srv.plane.deps.bus.recent({ types: ['resource.limit'] });
    expect(limits.length).toBeGreaterThanOrEqual(17);
    expect(limits.every((e) => e.data?.reason === 'max_sandboxes')).toBe(true);
  });

  it('without an owner id the API key, then the client address, is the owner (spec 5.1 rule 7)', async () => {
    const first = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(first.status).toBe(201);
    // The derived owner is a digest: neither the address nor a key is stored or shown.
    expect(first.body.owner_id).toMatch(/^ip\/[0-9a-f]{16}$/);
    const again = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(again.status).toBe(429);
    expect(again.body).toMatchObject({ code: 'resource_limit', reason: 'max_sandboxes_per_owner' });
    const preflight = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', {});
    expect(preflight.body).toMatchObject({
      allowed: false,
      reason: 'max_sandboxes_per_owner',
      active_owner_sandboxes: 1,
      max_owner_sandboxes: 1,
    });
    // The same address with an API key is another owner (auth is off here, the key is attribution).
    const withKey = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-API-Key': 'team-key-0123456789' });
    expect(withKey.status).toBe(201);
    expect(withKey.body.owner_id).toMatch(/^key\/[0-9a-f]{16}$/);
    expect(JSON.stringify(withKey.body)).not.toContain('team-key');
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-API-Key': 'team-key-0123456789' })).status).toBe(429);
  });

  it('the owner limit and TTL are 429 resource_limit; template spawns share the decision', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).status).toBe(201);
    const owner = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' });
    expect(owner.status).toBe(429);
    expect(owner.body).toMatchObject({ code: 'resource_limit', reason: 'max_sandboxes_per_owner' });
    const ttl = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '2h' }, { 'X-User-ID': 'bob' });
    expect(ttl.status).toBe(429);
    expect(ttl.body.reason).toBe('max_ttl');

    expect((await call(srv.url, 'POST', '/api/v1/templates', { name: 'adm-t', ttl: '5m' })).status).toBe(201);
    const viaTemplate = await call(srv.url, 'POST', '/api/v1/templates/adm-t/spawn', {}, { 'X-User-ID': 'alice' });
    expect(viaTemplate.status).toBe(429);
    expect(viaTemplate.body.reason).toBe('max_sandboxes_per_owner');
    expect((await call(srv.url, 'POST', '/api/v1/templates/adm-t/spawn', {}, { 'X-User-ID': 'carol' })).status).toBe(201);
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'erin' })).status).toBe(201);
    const full = await call(srv.url, 'POST', '/api/v1/templates/adm-t/spawn', {}, { 'X-User-ID': 'dave' });
    expect(full.status).toBe(503);
  });

  it('the preflight creates nothing and honours X-User-ID over the body owner', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).status).toBe(201);
    const before = await srv.plane.deps.store.listSandboxes();
    const asAlice = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', { owner_id: 'bob' }, { 'X-User-ID': 'alice' });
    expect(asAlice.status).toBe(200);
    expect(asAlice.body).toEqual({
      allowed: false,
      queueable: false,
      reason: 'max_sandboxes_per_owner',
      active_sandboxes: 1,
      max_sandboxes: 3,
      active_owner_sandboxes: 1,
      max_owner_sandboxes: 1,
      max_ttl: '1h0m0s',
    });
    const asBob = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', { owner_id: 'bob' });
    expect(asBob.body).toMatchObject({ allowed: true, queueable: false, active_owner_sandboxes: 0 });
    const ttl = await call(srv.url, 'POST', '/api/v1/sandboxes/admission', { ttl: '3h' });
    expect(ttl.body).toMatchObject({ allowed: false, queueable: false, reason: 'max_ttl' });
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes/admission', undefined, { 'X-User-ID': 'a b' })).status).toBe(400);
    expect(await srv.plane.deps.store.listSandboxes()).toEqual(before);
  });
});

describe('admission in queue mode', () => {
  let srv: TestServer;
  let events: SbxEvent[];
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_sandboxes: 1, spawn_overflow: 'queue', spawn_queue_timeout: '1s', max_spawn_queue: 1 } });
    events = [];
    srv.plane.deps.bus.subscribe((e) => {
      if (e.type.startsWith('spawn.')) events.push(e);
    });
  });
  afterAll(async () => srv?.close());
  afterEach(async () => {
    for (const s of (await call(srv.url, 'GET', '/api/v1/sandboxes')).body) await call(srv.url, 'DELETE', `/api/v1/sandboxes/${s.id}`);
    events.length = 0;
  });

  it('a waiting spawn completes soon after a destroy; the next waiter times out; overflow is immediate', async () => {
    const first = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(first.status).toBe(201);
    const waiting = call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'w1' });
    await queued(srv, 1);
    const destroyedAt = Date.now();
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${first.body.id}`)).status).toBe(200);
    const second = await waiting;
    expect(second.status).toBe(201);
    expect(Date.now() - destroyedAt).toBeLessThan(1000);

    // Capacity is taken by the dequeued sandbox: one more waits and times out, a third overflows.
    const t0 = Date.now();
    const timedOut = call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'w2' });
    await queued(srv, 1);
    const overflow = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'w3' });
    expect(overflow.status).toBe(429);
    expect(overflow.body).toMatchObject({ code: 'resource_limit', reason: 'spawn_queue_full' });
    expect(Date.now() - t0).toBeLessThan(900);
    const late = await timedOut;
    expect(late.status).toBe(429);
    expect(late.body).toMatchObject({ code: 'resource_limit', reason: 'spawn_queue_timeout' });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(950);
    expect(Date.now() - t0).toBeLessThan(3000);

    expect(events.map((e) => [e.type, e.owner_id])).toEqual([
      ['spawn.queued', 'w1'],
      ['spawn.dequeued', 'w1'],
      ['spawn.queued', 'w2'],
      ['spawn.queue_timeout', 'w2'],
    ]);
    const s = srv.plane.deps.admission.stats({ ...srv.plane.deps.locator.figures(), owner_quotas: 0 });
    expect(s).toMatchObject({
      spawn_overflow: 'queue',
      spawn_queue_depth: 0,
      max_spawn_queue: 1,
      spawn_queue_timeout: '1s',
      admission_control: true,
      spawn_queue_timeouts: 1,
    });
    expect(s.spawn_queued_total).toBeGreaterThanOrEqual(2);
    expect(s.spawn_queue_wait_max_ms).toBeGreaterThanOrEqual(950);
    expect(s.spawn_queue_wait_count).toBe(s.spawn_dequeued_total + s.spawn_queue_timeouts);
  });

  it('a TTL denial is never queued', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {})).status).toBe(201);
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: '48h' });
    expect(res.status).toBe(429);
    expect(res.body.reason).toBe('max_ttl');
    expect(events).toEqual([]);
  });

  it('a client that disconnects while queued leaves the queue', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {})).status).toBe(201);
    const ac = new AbortController();
    const gone = fetch(`${srv.url}/api/v1/sandboxes`, {
      method: 'POST',
      signal: ac.signal,
      headers: { 'content-type': 'application/json' },
      body: '{}',
    }).catch(() => 'aborted');
    await queued(srv, 1);
    ac.abort();
    expect(await gone).toBe('aborted');
    await queued(srv, 0);
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes')).body).toHaveLength(1);
  });
});

describe('queue mode: a quota raise releases a waiting owner', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_sandboxes_per_owner: 1, spawn_overflow: 'queue', spawn_queue_timeout: '5s' } });
  });
  afterAll(async () => srv?.close());

  it('resumes on PUT /quotas', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).status).toBe(201);
    const waiting = call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' });
    await queued(srv, 1);
    // Another owner is not held up behind alice.
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'bob' })).status).toBe(201);
    expect(srv.plane.deps.admission.stats({ ...srv.plane.deps.locator.figures(), owner_quotas: 0 }).spawn_queue_depth).toBe(1);
    const t0 = Date.now();
    expect((await call(srv.url, 'PUT', '/api/v1/quotas/alice', { max_sandboxes: 2 })).status).toBe(200);
    const res = await waiting;
    expect(res.status).toBe(201);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect((await call(srv.url, 'GET', '/api/v1/quotas/alice/usage')).body.active_sandboxes).toBe(2);
  });
});
