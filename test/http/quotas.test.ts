import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
let base: string;

beforeAll(async () => {
  srv = await startTestServer({ defaults: { max_ttl: '2h', max_exec_timeout: '5m', max_sandboxes_per_owner: 2 } });
  base = srv.url;
});
afterAll(async () => srv?.close());

describe('owner quotas (spec 4.4)', () => {
  it('rejects invalid owner ids, negative counts and malformed, sub-second or fractional durations with 400', async () => {
    const cases: Array<[string, unknown]> = [
      ['a%20b', {}],
      ['a%2Fb', {}],
      ['a%5Cb', {}],
      ['a%09b', {}],
      ['x'.repeat(129), {}],
      ['alice', { max_sandboxes: -1 }],
      ['alice', { max_sandboxes: 1.5 }],
      ['alice', { max_ttl: 'forever' }],
      ['alice', { max_ttl: '10' }],
      ['alice', { max_ttl: '500ms' }],
      ['alice', { max_ttl: '1.5s' }],
      ['alice', { max_exec_timeout: '2500ms' }],
      ['alice', { max_exec_timeout: '-5s' }],
      ['alice', { max_sandboxes: 1, extra: true }],
    ];
    for (const [owner, body] of cases) {
      const res = await call(base, 'PUT', `/api/v1/quotas/${owner}`, body);
      expect(res.status, `${owner} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.code).toBe('bad_request');
    }
    expect((await call(base, 'GET', '/api/v1/quotas/a%20b')).status).toBe(400);
    expect((await call(base, 'GET', '/api/v1/quotas')).body).toEqual([]);
    expect(srv.plane.deps.bus.recent({ types: ['quota.*'] })).toEqual([]);
  });

  it('saves, reads, lists, summarises, reports usage and deletes', async () => {
    const since = new Date().toISOString();
    const put = await call(base, 'PUT', '/api/v1/quotas/alice', { max_sandboxes: 3, max_ttl: '1h', max_exec_timeout: '0s' });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ owner_id: 'alice', max_sandboxes: 3, max_ttl: '1h0m0s', max_exec_timeout: '0s' });
    await new Promise((r) => setTimeout(r, 5));
    const again = await call(base, 'PUT', '/api/v1/quotas/alice', { max_sandboxes: 4, max_ttl: '90m' });
    expect(again.body).toMatchObject({ max_sandboxes: 4, max_ttl: '1h30m0s', created_at: put.body.created_at });
    expect(again.body.updated_at > put.body.updated_at).toBe(true);
    expect((await call(base, 'GET', '/api/v1/quotas/alice')).body).toEqual(again.body);
    await call(base, 'PUT', '/api/v1/quotas/bob', {});
    const list = await call(base, 'GET', '/api/v1/quotas');
    expect(list.body.map((q: { owner_id: string }) => q.owner_id)).toEqual(['alice', 'bob']);

    const summary = await call(base, 'GET', '/api/v1/quotas/summary');
    expect(summary.body).toEqual({ total: 2, with_max_sandboxes: 1, with_max_ttl: 1, with_max_exec_timeout: 0 });
    expect(summary.text).not.toMatch(/alice|bob/);

    await call(base, 'POST', '/api/v1/sandboxes', { ttl: '10m' }, { 'X-User-ID': 'alice' });
    const usage = await call(base, 'GET', '/api/v1/quotas/alice/usage');
    expect(usage.body).toEqual({
      owner_id: 'alice',
      active_sandboxes: 1,
      max_sandboxes: 4,
      max_ttl: '1h30m0s',
      max_exec_timeout: '5m0s',
      quota_configured: true,
    });
    const none = await call(base, 'GET', '/api/v1/quotas/nobody/usage');
    expect(none.body).toEqual({
      owner_id: 'nobody',
      active_sandboxes: 0,
      max_sandboxes: 2,
      max_ttl: '2h0m0s',
      max_exec_timeout: '5m0s',
      quota_configured: false,
    });

    expect((await call(base, 'DELETE', '/api/v1/quotas/bob')).body).toEqual({ status: 'deleted' });
    expect((await call(base, 'DELETE', '/api/v1/quotas/bob')).status).toBe(404);
    expect((await call(base, 'GET', '/api/v1/quotas/bob')).status).toBe(404);

    const kinds = srv.plane.deps.bus.recent({ types: ['quota.*'] }).map((e) => [e.type, e.owner_id]);
    expect(kinds).toEqual([
      ['quota.saved', 'alice'],
      ['quota.saved', 'alice'],
      ['quota.saved', 'bob'],
      ['quota.deleted', 'bob'],
    ]);
    const audit = await srv.plane.deps.store.listAudit({ path: '/api/v1/quotas', since });
    expect(audit.map((a) => [a.method, a.path, a.status]).sort()).toEqual([
      ['DELETE', '/api/v1/quotas/bob', 200],
      ['DELETE', '/api/v1/quotas/bob', 404],
      ['PUT', '/api/v1/quotas/alice', 200],
      ['PUT', '/api/v1/quotas/alice', 200],
      ['PUT', '/api/v1/quotas/bob', 200],
    ]);
  });

  it('accepts an owner id of exactly 128 characters', async () => {
    const owner = 'o'.repeat(128);
    const put = await call(base, 'PUT', `/api/v1/quotas/${owner}`, { max_sandboxes: 1 });
    expect(put.status).toBe(200);
    expect((await call(base, 'GET', `/api/v1/quotas/${owner}/usage`)).body).toMatchObject({
      owner_id: owner,
      max_sandboxes: 1,
      quota_configured: true,
    });
    expect((await call(base, 'DELETE', `/api/v1/quotas/${owner}`)).status).toBe(200);
  });

  it('serves the same handlers under the admin aliases (spec 4.9)', async () => {
    const put = await call(base, 'PUT', '/api/v1/admin/quotas/carol', { max_sandboxes: 1 });
    expect(put.status).toBe(200);
    expect((await call(base, 'GET', '/api/v1/quotas/carol')).body).toEqual(put.body);
    expect((await call(base, 'GET', '/api/v1/admin/quotas/carol')).body).toEqual(put.body);
    expect((await call(base, 'GET', '/api/v1/admin/quotas')).body.some((q: { owner_id: string }) => q.owner_id === 'carol')).toBe(true);
    expect((await call(base, 'GET', '/api/v1/admin/quotas/summary')).body.total).toBeGreaterThanOrEqual(1);
    expect((await call(base, 'GET', '/api/v1/admin/quotas/carol/usage')).body.max_sandboxes).toBe(1);
    expect((await call(base, 'DELETE', '/api/v1/admin/quotas/carol')).body).toEqual({ status: 'deleted' });
    // Recorded once each (by the admin audit), not twice.
    const audit = await srv.plane.deps.store.listAudit({ path: '/api/v1/admin/quotas/carol' });
    expect(audit.filter((a) => a.method === 'PUT')).toHaveLength(1);
    expect(audit.filter((a) => a.method === 'DELETE')).toHaveLength(1);
  });

  it('records every save and delete attempt on both paths the same way, refused ones included', async () => {
    const since = new Date().toISOString();
    for (const prefix of ['/api/v1', '/api/v1/admin']) {
      await call(base, 'PUT', `${prefix}/quotas/frank`, { max_sandboxes: 1 }); // 200
      await call(base, 'PUT', `${prefix}/quotas/frank`, { max_sandboxes: -1 }); // 400 from the schema
      await call(base, 'PUT', `${prefix}/quotas/frank`, { max_ttl: '1.5s' }); // 400 from the service
      await call(base, 'PUT', `${prefix}/quotas/fr%20ank`, {}); // 400 invalid owner id
      await call(base, 'DELETE', `${prefix}/quotas/frank`); // 200
      await call(base, 'DELETE', `${prefix}/quotas/frank`); // 404
    }
    const rows = (await srv.plane.deps.store.listAudit({ since })).reverse();
    // Sorted: rows written in the same millisecond have no defined order between them.
    const shape = (prefix: string) =>
      rows
        .filter((r) => r.path.startsWith(`${prefix}/quotas/`))
        .map((r) => `${r.method} ${r.path.slice(prefix.length)} ${r.status}`)
        .sort();
    const expected = [
      'PUT /quotas/frank 200',
      'PUT /quotas/frank 400',
      'PUT /quotas/frank 400',
      'PUT /quotas/fr%20ank 400',
      'DELETE /quotas/frank 200',
      'DELETE /quotas/frank 404',
    ].sort();
    expect(shape('/api/v1/admin')).toEqual(expected);
    expect(shape('/api/v1').filter((r) => !r.includes('admin'))).toEqual(expected);
    expect(rows).toHaveLength(12);
    // One id format for every audit row, whichever path wrote it.
    for (const r of rows) expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    // Reads are not audited on the compatibility paths.
    await call(base, 'GET', '/api/v1/quotas/frank');
    expect(await srv.plane.deps.store.listAudit({ since })).toHaveLength(12);
  });

  it('0s inherits the global default; a quota overrides TTL and exec timeout', async () => {
    await call(base, 'PUT', '/api/v1/quotas/dave', { max_ttl: '0s', max_exec_timeout: '0s' });
    expect((await call(base, 'GET', '/api/v1/quotas/dave/usage')).body).toMatchObject({
      max_ttl: '2h0m0s',
      max_exec_timeout: '5m0s',
      max_sandboxes: 2,
    });
    const tooLong = await call(base, 'POST', '/api/v1/sandboxes', { ttl: '3h' }, { 'X-User-ID': 'dave' });
    expect(tooLong.status).toBe(429);
    expect(tooLong.body).toMatchObject({ code: 'resource_limit', reason: 'max_ttl' });

    await call(base, 'PUT', '/api/v1/quotas/dave', { max_ttl: '4h', max_exec_timeout: '10s' });
    const ok = await call(base, 'POST', '/api/v1/sandboxes', { ttl: '3h' }, { 'X-User-ID': 'dave' });
    expect(ok.status).toBe(201);
    // A sandbox of dave's: exec timeout above his quota is refused before any stream starts.
    const over = await call(base, 'POST', `/api/v1/sandboxes/${ok.body.id}/exec`, { command: 'echo hi', timeout: '20s', stream: true });
    expect(over.status).toBe(429);
    expect(over.headers.get('content-type')).toMatch(/application\/json/);
    expect(over.body).toMatchObject({ code: 'resource_limit', reason: 'max_exec_timeout' });
    const within = await call(base, 'POST', `/api/v1/sandboxes/${ok.body.id}/exec`, { command: 'echo hi', timeout: '10s' });
    expect(within.status).toBe(200);
    expect(within.body.stdout).toBe('hi\n');
  });

  it('global exec timeout maximum applies without a quota', async () => {
    const sb = await call(base, 'POST', '/api/v1/sandboxes', {});
    const over = await call(base, 'POST', `/api/v1/sandboxes/${sb.body.id}/exec`, { command: 'echo hi', timeout: '6m', stream: true });
    expect(over.status).toBe(429);
    expect(over.body.code).toBe('resource_limit');
  });

  it('X-User-ID is validated (400) and overrides the body owner_id', async () => {
    const bad = await call(base, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'a/b' });
    expect(bad.status).toBe(400);
    const ok = await call(base, 'POST', '/api/v1/sandboxes', { owner_id: 'body-owner' }, { 'X-User-ID': ' header-owner ' });
    expect(ok.status).toBe(201);
    expect(ok.body.owner_id).toBe('header-owner');
    expect((await call(base, 'GET', '/api/v1/quotas/header-owner/usage')).body.active_sandboxes).toBe(1);
  });
});

describe('quota audit with auth enabled', () => {
  const apiKey = 'k'.repeat(40);
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({ auth: { enabled: true, api_key: apiKey } });
  });
  afterAll(async () => s?.close());

  it('records the actor without the key', async () => {
    const res = await call(s.url, 'PUT', '/api/v1/quotas/erin', { max_sandboxes: 2 }, { 'X-API-Key': apiKey, 'X-User-ID': 'ops' });
    expect(res.status).toBe(200);
    const del = await call(s.url, 'DELETE', '/api/v1/quotas/erin', undefined, { 'X-API-Key': apiKey });
    expect(del.status).toBe(200);
    const audit = await s.plane.deps.store.listAudit({ path: '/api/v1/quotas/erin' });
    expect(audit).toHaveLength(2);
    expect(audit.map((a) => a.method).sort()).toEqual(['DELETE', 'PUT']);
    for (const a of audit) {
      expect(a.actor).not.toContain(apiKey);
      expect(a.actor.length).toBeGreaterThan(0);
      expect(a.request_id).not.toBe('');
    }
    expect(audit.find((a) => a.method === 'PUT')!.actor).toContain('ops');
    expect(JSON.stringify(audit)).not.toContain(apiKey);
  });
});
