import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('rate limiting is off by default', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer();
  });
  afterAll(async () => srv?.close());

  it('sends no rate-limit headers and never limits', async () => {
    for (let i = 0; i < 5; i++) {
      const res = await call(srv.url, 'GET', '/api/v1/sandboxes');
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBeNull();
    }
    expect(srv.plane.deps.rateLimiter?.stats()).toMatchObject({ enabled: false, active_buckets: 0, allowed_total: 0 });
  });
});

describe('rate limiting keyed by owner', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({
      rate_limit: { enabled: true, requests_per_minute: 60, burst: 3, key_by: 'owner', bucket_ttl: '300ms', cleanup_interval: '100ms' },
    });
  });
  afterAll(async () => srv?.close());

  it('allows the burst with headers, then 429 with Retry-After; keys are isolated', async () => {
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'alice' });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-ratelimit-limit')).toBe('60');
      remaining.push(res.headers.get('x-ratelimit-remaining')!);
    }
    expect(remaining).toEqual(['2', '1', '0']);
    const limited = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'alice' });
    expect(limited.status).toBe(429);
    expect(limited.body).toMatchObject({ code: 'resource_limit', reason: 'rate_limit' });
    const retry = Number(limited.headers.get('retry-after'));
    expect(Number.isInteger(retry)).toBe(true);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('x-ratelimit-limit')).toBe('60');
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    // One resource.limit event when alice starts being refused, naming no identity.
    const limitEvents = () => srv.plane.deps.bus.since(0, { types: ['resource.limit'] });
    expect(limitEvents()).toHaveLength(1);
    expect(limitEvents()[0]).toMatchObject({ data: { reason: 'rate_limit', key_by: 'owner', retry_after: retry } });
    expect(JSON.stringify(limitEvents())).not.toContain('alice');
    // A spawn from alice is limited too, before it reaches admission.
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).status).toBe(429);
    expect(await srv.plane.deps.store.listSandboxes()).toEqual([]);
    expect(limitEvents()).toHaveLength(1);

    const bob = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'bob' });
    expect(bob.status).toBe(200);
    expect(bob.headers.get('x-ratelimit-remaining')).toBe('2');
    // Without X-User-ID the API key, then the client address, is the key.
    const byKey = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-API-Key': 'some-key' });
    expect(byKey.headers.get('x-ratelimit-remaining')).toBe('2');
    const byIp = await call(srv.url, 'GET', '/api/v1/sandboxes');
    expect(byIp.headers.get('x-ratelimit-remaining')).toBe('2');
  });

  it('never limits health, liveness and readiness', async () => {
    for (let i = 0; i < 8; i++) {
      for (const p of ['/api/v1/health', '/api/v1/live', '/api/v1/ready']) {
        const res = await call(srv.url, 'GET', p, undefined, { 'X-User-ID': 'alice' });
        expect(res.status, p).toBe(200);
        expect(res.headers.get('x-ratelimit-limit'), p).toBeNull();
      }
    }
  });

  it('keeps identities hashed and evicts idle buckets', async () => {
    const stats = srv.plane.deps.rateLimiter!.stats();
    expect(stats).toMatchObject({
      enabled: true,
      requests_per_minute: 60,
      burst: 3,
      key_by: 'owner',
      bucket_ttl: '300ms',
      cleanup_interval: '100ms',
    });
    expect(stats.limited_total).toBeGreaterThanOrEqual(2);
    expect(stats.allowed_total).toBeGreaterThanOrEqual(6);
    expect(JSON.stringify(stats)).not.toMatch(/alice|bob|some-key|127\.0\.0\.1/);
    await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'carol' });
    expect(srv.plane.deps.rateLimiter!.stats().active_buckets).toBeGreaterThanOrEqual(1);
    await sleep(600);
    const after = srv.plane.deps.rateLimiter!.stats();
    expect(after.active_buckets).toBe(0);
    expect(after.evicted_total).toBeGreaterThanOrEqual(4);
    // An evicted bucket starts full again.
    const fresh = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'alice' });
    expect(fresh.status).toBe(200);
    expect(fresh.headers.get('x-ratelimit-remaining')).toBe('2');
  });
});

describe('rate limiting keyed by ip and by api_key', () => {
  let byIp: TestServer;
  let byKey: TestServer;
  beforeAll(async () => {
    const rl = { enabled: true, requests_per_minute: 60, burst: 2 };
    byIp = await startTestServer({ rate_limit: { ...rl, key_by: 'ip' } });
    byKey = await startTestServer({ rate_limit: { ...rl, key_by: 'api_key' } });
  });
  afterAll(async () => {
    await byIp?.close();
    await byKey?.close();
  });

  it('ip: X-User-ID does not get a caller a fresh bucket', async () => {
    expect((await call(byIp.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'u1' })).status).toBe(200);
    expect((await call(byIp.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'u2' })).status).toBe(200);
    expect((await call(byIp.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'u3' })).status).toBe(429);
  });

  it('api_key: one bucket per key, X-User-ID ignored', async () => {
    const h = (key: string, user: string) => ({ 'X-API-Key': key, 'X-User-ID': user });
    expect((await call(byKey.url, 'GET', '/api/v1/sandboxes', undefined, h('key-a', 'u1'))).status).toBe(200);
    expect((await call(byKey.url, 'GET', '/api/v1/sandboxes', undefined, h('key-a', 'u2'))).status).toBe(200);
    expect((await call(byKey.url, 'GET', '/api/v1/sandboxes', undefined, h('key-a', 'u3'))).status).toBe(429);
    expect((await call(byKey.url, 'GET', '/api/v1/sandboxes', undefined, h('key-b', 'u1'))).status).toBe(200);
    expect(JSON.stringify(byKey.plane.deps.rateLimiter!.stats())).not.toContain('key-a');
  });
});

describe('rate limiting runs after auth', () => {
  const apiKey = 'r'.repeat(40);
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({
      auth: { enabled: true, api_key: apiKey },
      rate_limit: { enabled: true, requests_per_minute: 60, burst: 1, key_by: 'ip' },
    });
  });
  afterAll(async () => srv?.close());

  it('a refused credential costs no token', async () => {
    for (let i = 0; i < 3; i++) {
      const bad = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-API-Key': 'wrong' });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('x-ratelimit-limit')).toBeNull();
    }
    const ok = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-API-Key': apiKey });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-API-Key': apiKey })).status).toBe(429);
  });
});

describe('rate limiting keys on the validated X-User-ID', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ rate_limit: { enabled: true, requests_per_minute: 60, burst: 2, key_by: 'owner' } });
  });
  afterAll(async () => srv?.close());

  it('a padded id shares the bucket of the trimmed one; a malformed one is 400 and costs nothing', async () => {
    expect(
      (await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'alice' })).headers.get('x-ratelimit-remaining'),
    ).toBe('1');
    const padded = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': '  alice  ' });
    expect(padded.headers.get('x-ratelimit-remaining')).toBe('0');
    expect((await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'alice\t' })).status).toBe(429);
    for (let i = 0; i < 3; i++) {
      const bad = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'a/b' });
      expect(bad.status).toBe(400);
      expect(bad.body.code).toBe('bad_request');
      expect(bad.headers.get('x-ratelimit-limit')).toBeNull();
    }
    expect(srv.plane.deps.rateLimiter!.stats()).toMatchObject({ allowed_total: 2, limited_total: 1, active_buckets: 1 });
  });
});
