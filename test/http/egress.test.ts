import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Provider, SpawnSpec } from '../../src/core/ports/index.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The egress API (DESIGN.md §10) over a real server. The mock provider cannot enforce egress
 * rules, so `filtered` answers 501 there; the second server gives the mock a stand-in enforcer
 * (the docker suite test/docker/egress.test.ts does the real thing) to test storage, visibility
 * and the PUT route.
 */

const live = async (url: string) => ((await call(url, 'GET', '/api/v1/sandboxes')).body as unknown[]).length;

describe('egress on a provider that cannot enforce it', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer();
  });
  afterAll(async () => srv?.close());

  it('answers filtered with 501 and the reason, nothing created', async () => {
    for (const body of [
      { network: 'filtered' },
      { egress: { allow: ['pypi.org'] } },
      { network: 'filtered', egress: { allow: ['pypi.org:443'], deny: [] } },
    ]) {
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
      expect(res.status, JSON.stringify(body)).toBe(501);
      expect(res.body.code).toBe('not_implemented');
      expect(res.body.message).toMatch(/filtered.*provider mock cannot/);
    }
    expect(await live(srv.url)).toBe(0);
  });

  it('refuses bad input with 400 before anything else', async () => {
    const bad: Array<[unknown, RegExp]> = [
      [{ network: 'bridge', egress: { allow: ['pypi.org'] } }, /need network "filtered", not "bridge"/],
      [{ network: 'none', egress: { allow: [] } }, /not "none"/],
      [{ egress: { allow: [''] } }, /empty/],
      [{ egress: { allow: ['a.*.com'] } }, /"a\.\*\.com".*wildcard/],
      [{ egress: { allow: ['pypi.org:99999'] } }, /port/],
      [{ egress: { deny: ['10.0.0.1/8'] } }, /"10\.0\.0\.1\/8"/],
      [{ egress: { allow: ['2001:db8::1/64:443'] } }, /\[addr\]:port/],
      [{ egress: { allow: [`${'x'.repeat(254)}`] } }, /253/],
      [{ egress: { allow: Array.from({ length: 65 }, (_, i) => `h${i}.test`) } }, /at most 64/],
      [{ egress: { allow: ['a.test'], other: [] } }, /./],
    ];
    for (const [body, msg] of bad) {
      const res = await call(srv.url, 'POST', '/api/v1/sandboxes', body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toMatch(msg);
    }
    expect(await live(srv.url)).toBe(0);
  });

  it('a filtered template on a provider that cannot enforce it: 400 for bad input, else 501', async () => {
    const bad = await call(srv.url, 'POST', '/api/v1/templates', { name: 'bad', network: 'none', egress: { allow: ['pypi.org'] } });
    expect(bad.status).toBe(400);
    const refused = await call(srv.url, 'POST', '/api/v1/templates', { name: 'pip', egress: { allow: ['PyPI.org.'] } });
    expect(refused.status).toBe(501);
    expect(refused.body.message).toMatch(/provider mock cannot/);
    expect((await call(srv.url, 'GET', '/api/v1/templates/pip')).status).toBe(404);
  });
});

describe('egress API with an enforcing provider', () => {
  let srv: TestServer;
  const changed: string[] = [];
  const ADMIN = { 'x-admin-api-key': 'egress-admin-key-5a7c9e1b3d5f7a9c1e3b5d7f' };
  const as = (user: string) => ({ 'x-user-id': user });
  beforeAll(async () => {
    srv = await startTestServer({
      auth: { admin_api_key: ADMIN['x-admin-api-key'] },
      defaults: { network: 'filtered', egress: { allow: ['Default.Example.'], deny: [] } },
    });
    // A stand-in enforcer on the mock: it accepts filtered spawns and records PUTs.
    const mock = srv.plane.deps.providers.get('mock') as Provider & { egress?: Provider['egress'] };
    // Read past the metrics proxy, which keeps the first method it hands out.
    const spawn = (Object.getOwnPropertyDescriptor(mock, 'spawn')!.value as Provider['spawn']).bind(mock);
    Object.assign(mock, {
      egress: { unavailable: () => null, changed: (id: string) => changed.push(id) },
      spawn: async (spec: SpawnSpec, signal?: AbortSignal) => {
        const { network, ...rest } = spec;
        const r = await spawn(rest, signal);
        return { ...r, network: network ?? r.network };
      },
    });
  });
  afterAll(async () => srv?.close());

  it('defaults.egress applies only to spawns that get filtered from defaults.network', async () => {
    const byDefault = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, as('alice'));
    expect(byDefault.status, byDefault.text).toBe(201);
    expect(byDefault.body.network).toBe('filtered');
    expect(byDefault.body.egress).toEqual({ allow: ['default.example'], deny: [] });
    const explicit = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' }, as('alice'));
    expect(explicit.body.egress).toEqual({ allow: [], deny: [] });
    const own = await call(srv.url, 'POST', '/api/v1/sandboxes', { egress: { allow: ['pypi.org'] } }, as('alice'));
    expect(own.body.egress).toEqual({ allow: ['pypi.org'], deny: [] });
  });

  it('shows the rules only to the owner and admins', async () => {
    const res = await call(
      srv.url,
      'POST',
      '/api/v1/sandboxes',
      { egress: { allow: ['secret.internal.example'], deny: ['*.example.com'] } },
      as('alice'),
    );
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, as('alice'))).body.egress).toEqual({
      allow: ['secret.internal.example'],
      deny: ['*.example.com'],
    });
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, ADMIN)).body.egress).toBeDefined();
    const bob = await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, as('bob'));
    expect(bob.body.network).toBe('filtered');
    expect(bob.body.egress).toBeUndefined();
    expect(bob.text).not.toContain('secret.internal');
    const list = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, as('bob'));
    expect(list.text).not.toContain('secret.internal');
    const put = await call(srv.url, 'PUT', `/api/v1/sandboxes/${id}/egress`, { allow: ['other.example'] }, as('bob'));
    expect(put.text).not.toContain('other.example');
  });

  it('PUT replaces the lists, tells the enforcer, and answers the sandbox', async () => {
    const id = (await call(srv.url, 'POST', '/api/v1/sandboxes', { egress: { allow: ['a.example'] } }, as('alice'))).body.id as string;
    const res = await call(
      srv.url,
      'PUT',
      `/api/v1/sandboxes/${id}/egress`,
      { allow: ['B.example.:443'], deny: ['10.0.0.0/8'] },
      as('alice'),
    );
    expect(res.status).toBe(200);
    expect(res.body.id).toBe(id);
    expect(res.body.egress).toEqual({ allow: ['b.example:443'], deny: ['10.0.0.0/8'] });
    expect(changed).toContain(id);
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, as('alice'))).body.egress).toEqual({
      allow: ['b.example:443'],
      deny: ['10.0.0.0/8'],
    });
    // A bad rule changes nothing.
    const bad = await call(srv.url, 'PUT', `/api/v1/sandboxes/${id}/egress`, { allow: ['ok.example', '*bad'] }, as('alice'));
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain('"*bad"');
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${id}`, undefined, as('alice'))).body.egress.allow).toEqual(['b.example:443']);
    // Unknown sandbox → 404; an unknown field → 400.
    expect((await call(srv.url, 'PUT', '/api/v1/sandboxes/sbx-nope/egress', { allow: [] })).status).toBe(404);
    expect((await call(srv.url, 'PUT', `/api/v1/sandboxes/${id}/egress`, { allow: [], extra: 1 }, as('alice'))).status).toBe(400);
  });

  it('templates keep egress (given alone it means filtered); a spawn naming its own network drops it', async () => {
    const created = await call(srv.url, 'POST', '/api/v1/templates', {
      name: 'pip',
      egress: { allow: ['PyPI.org.', '*.pythonhosted.org:443'] },
    });
    expect(created.status, created.text).toBe(201);
    expect(created.body.network).toBe('filtered');
    expect(created.body.egress).toEqual({ allow: ['pypi.org', '*.pythonhosted.org:443'], deny: [] });
    expect((await call(srv.url, 'GET', '/api/v1/templates/pip')).body.egress).toEqual({
      allow: ['pypi.org', '*.pythonhosted.org:443'],
      deny: [],
    });
    const spawned = await call(srv.url, 'POST', '/api/v1/templates/pip/spawn', {}, as('alice'));
    expect(spawned.status).toBe(201);
    expect(spawned.body.egress).toEqual({ allow: ['pypi.org', '*.pythonhosted.org:443'], deny: [] });
    const own = await call(srv.url, 'POST', '/api/v1/templates/pip/spawn', { egress: { allow: ['a.example'] } }, as('alice'));
    expect(own.body.egress).toEqual({ allow: ['a.example'], deny: [] });
    const plain = await call(srv.url, 'POST', '/api/v1/templates/pip/spawn', { network: 'bridge' }, as('alice'));
    expect(plain.status).toBe(201);
    expect(plain.body.network).toBe('bridge');
    expect(plain.body.egress).toBeUndefined();
  });

  it('PUT on a sandbox that is not filtered → 409 conflict', async () => {
    const res = await call(srv.url, 'POST', '/api/v1/sandboxes', { network: 'bridge' }, as('alice'));
    // The mock stand-in takes the network as given.
    expect(res.status).toBe(201);
    const put = await call(srv.url, 'PUT', `/api/v1/sandboxes/${res.body.id}/egress`, { allow: ['pypi.org'] }, as('alice'));
    expect(put.status).toBe(409);
    expect(put.body.code).toBe('conflict');
    expect(res.body.egress).toBeUndefined();
  });
});
