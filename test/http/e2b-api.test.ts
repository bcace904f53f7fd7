import { AuthenticationError, NotFoundError, RateLimitError, Sandbox, SandboxError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * E2B's control plane under /e2b (DESIGN.md §14), driven by E2B's own JS SDK (the `e2b` package,
 * unmodified) against a real server on a real port (mock provider). Every request the SDK makes is
 * logged through its `logger` option and must go to this server, never to E2B's public hosts.
 */
const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

interface Sdk {
  apiUrl: string;
  apiKey: string;
  domain: string;
  retries: number;
  logger: { info: (...a: unknown[]) => void; error: (...a: unknown[]) => void; warn: (...a: unknown[]) => void; debug: () => void };
  headers?: Record<string, string>;
}

function sdkFor(srv: TestServer, apiKey = KEY, requested: string[] = []): Sdk {
  const port = new URL(srv.url).port;
  const record = (...a: unknown[]) => {
    const line = a.map(String).join(' ');
    const m = /^Request \w+ (\S+)/.exec(line);
    if (m) requested.push(m[1]!);
  };
  return {
    apiUrl: `${srv.url}/e2b`,
    apiKey,
    domain: `localhost:${port}`,
    retries: 0,
    logger: { info: record, error: () => undefined, warn: () => undefined, debug: () => undefined },
  };
}

async function native(srv: TestServer, path: string, init: RequestInit = {}, key = KEY) {
  const res = await fetch(`${srv.url}${path}`, {
    ...init,
    headers: { 'content-type': 'application/json', 'x-api-key': key, ...init.headers },
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : undefined, headers: res.headers };
}

describe('E2B SDK against /e2b (auth off)', () => {
  let srv: TestServer;
  const requested: string[] = [];
  let sdk: Sdk;
  beforeAll(async () => {
    srv = await startTestServer();
    sdk = sdkFor(srv, KEY, requested);
  });
  afterAll(async () => {
    await srv.close();
    // Nothing left for E2B's public hosts: every SDK request went to this server's /e2b.
    expect(requested.length).toBeGreaterThan(10);
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b/`)).toBe(true);
  });

  it('creates with metadata and envs; the native API sees the same sandbox, owner and events', async () => {
    const sbx = await Sandbox.create({
      ...sdk,
      metadata: { team: 'alpha', run: '1' },
      envs: { FOO: 'bar', GREETING: 'hi there' },
      timeoutMs: 120_000,
    });
    const port = new URL(srv.url).port;
    expect(sbx.sandboxId).toMatch(/\S+/);
    expect(sbx.sandboxDomain).toBe(`localhost:${port}`);
    expect(sbx.getHost(3000)).toBe(`3000-${sbx.sandboxId}.localhost:${port}`);

    const got = await native(srv, `/api/v1/sandboxes/${sbx.sandboxId}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id: sbx.sandboxId, state: 'running', provider: 'mock', metadata: { team: 'alpha', run: '1' } });
    // The owner is derived from the same key on both realms.
    const other = await native(srv, '/api/v1/sandboxes', { method: 'POST', body: '{}' });
    expect(other.status).toBe(201);
    expect(got.body!.owner_id).toMatch(/^key\//);
    expect(other.body!.owner_id).toBe(got.body!.owner_id);
    // The TTL is the timeout: about 120 s from now.
    const left = Date.parse(String(got.body!.expires_at)) - Date.now();
    expect(left).toBeGreaterThan(100_000);
    expect(left).toBeLessThanOrEqual(121_000);
    // The envs are kept for the command planes, and shown in no answer.
    const rec = await srv.plane.deps.store.getSandbox(sbx.sandboxId);
    expect(rec?.env).toEqual({ FOO: 'bar', GREETING: 'hi there' });
    expect(JSON.stringify(got.body)).not.toContain('hi there');
    const kinds = srv.plane.deps.bus.recent({ sandbox_id: sbx.sandboxId }).map((e) => e.type);
    expect(kinds).toEqual(expect.arrayContaining(['sandbox.created', 'sandbox.running']));
    // No envd token with auth, ownership and pool off and secure unset; secure: true gets one.
    expect(rec?.access_token_seed ?? null).toBeNull();
    const secured = await native(srv, '/e2b/v2/sandboxes', { method: 'POST', body: '{"secure": true}' });
    expect(secured.status).toBe(201);
    expect(secured.body!.envdAccessToken).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('lists with a metadata query and pages as the SDK paginator reads it', async () => {
    const a = await Sandbox.create({ ...sdk, metadata: { list: 'x', n: '1' } });
    const b = await Sandbox.create({ ...sdk, metadata: { list: 'x', n: '2' } });
    await Sandbox.create({ ...sdk, metadata: { list: 'y' } });
    const odd = await Sandbox.create({ ...sdk, metadata: { 'a key&=': 'v a/l%ue+&x=1', list: 'z' } });
    const found = await Sandbox.list({ ...sdk, query: { metadata: { 'a key&=': 'v a/l%ue+&x=1' } } }).nextItems();
    expect(found.map((s) => s.sandboxId)).toEqual([odd.sandboxId]);
    expect(found[0]!.metadata).toEqual({ 'a key&=': 'v a/l%ue+&x=1', list: 'z' });
    const all = await Sandbox.list({ ...sdk, query: { metadata: { list: 'x' } } }).nextItems();
    expect(all.map((s) => s.sandboxId).sort()).toEqual([a.sandboxId, b.sandboxId].sort());
    expect(all[0]).toMatchObject({ state: 'running', templateId: 'base', envdVersion: '0.5.7' });

    const pager = Sandbox.list({ ...sdk, limit: 1, query: { metadata: { list: 'x' } } });
    const first = await pager.nextItems();
    expect(first).toHaveLength(1);
    expect(pager.hasNext).toBe(true);
    const second = await pager.nextItems();
    expect(second).toHaveLength(1);
    expect(new Set([first[0]!.sandboxId, second[0]!.sandboxId])).toEqual(new Set([a.sandboxId, b.sandboxId]));
    if (pager.hasNext) expect(await pager.nextItems()).toEqual([]);

    // Nothing of these is paused: a paused-only query is empty; the v1 list filters the same way.
    expect(await Sandbox.list({ ...sdk, query: { state: ['paused'] } }).nextItems()).toEqual([]);
    const v1 = await native(srv, `/e2b/sandboxes?metadata=${encodeURIComponent('list=y')}`);
    expect(v1.status).toBe(200);
    expect((v1.body as unknown as unknown[]).length).toBe(1);
  });

  it('gets info, moves the end with setTimeout, connects to a running one, kills', async () => {
    const sbx = await Sandbox.create({ ...sdk, metadata: { k: 'v' }, timeoutMs: 300_000 });
    const info = await Sandbox.getInfo(sbx.sandboxId, sdk);
    expect(info).toMatchObject({
      sandboxId: sbx.sandboxId,
      templateId: 'base',
      metadata: { k: 'v' },
      state: 'running',
      envdVersion: '0.5.7',
    });
    expect(info.endAt.getTime() - info.startedAt.getTime()).toBeGreaterThan(290_000);
    expect(info.memoryMB).toBeGreaterThan(0);

    await sbx.setTimeout(900_000);
    const later = await sbx.getInfo();
    expect(later.endAt.getTime() - Date.now()).toBeGreaterThan(850_000);
    await Sandbox.setTimeout(sbx.sandboxId, 60_000, sdk);
    const shorter = await sbx.getInfo();
    expect(shorter.endAt.getTime() - Date.now()).toBeLessThanOrEqual(61_000);

    const again = await Sandbox.connect(sbx.sandboxId, { ...sdk, timeoutMs: 600_000 });
    expect(again.sandboxId).toBe(sbx.sandboxId);
    expect((await again.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(550_000);
    // A connect asking for less than what is left never shortens it.
    await Sandbox.connect(sbx.sandboxId, { ...sdk, timeoutMs: 10_000 });
    expect((await again.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(550_000);

    expect(await Sandbox.getMetrics(sbx.sandboxId, sdk)).toEqual([]);
    expect(await sbx.kill()).toBe(true);
    await expect(Sandbox.getInfo(sbx.sandboxId, sdk)).rejects.toBeInstanceOf(NotFoundError);
    expect(await Sandbox.kill(sbx.sandboxId, sdk)).toBe(false);
    expect((await native(srv, `/api/v1/sandboxes/${sbx.sandboxId}`)).status).toBe(404);
    const destroyed = srv.plane.deps.bus.recent({ sandbox_id: sbx.sandboxId, types: ['sandbox.destroyed'] });
    expect(destroyed).toHaveLength(1);
  });

  it('raises the SDK not-found error for a missing sandbox on every call', async () => {
    await expect(Sandbox.getInfo('nope-missing', sdk)).rejects.toBeInstanceOf(NotFoundError);
    await expect(Sandbox.setTimeout('nope-missing', 1000, sdk)).rejects.toBeInstanceOf(NotFoundError);
    await expect(Sandbox.connect('nope-missing', sdk)).rejects.toBeInstanceOf(NotFoundError);
    await expect(Sandbox.pause('nope-missing', sdk)).rejects.toBeInstanceOf(NotFoundError);
    await expect(Sandbox.getMetrics('nope-missing', sdk)).rejects.toBeInstanceOf(NotFoundError);
    // A template that does not exist is E2B's 404.
    const err = await Sandbox.create('no-such-template', sdk).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError & { statusCode?: number }).statusCode).toBe(404);
  });

  it('creates from an sbx template named as templateID; its TTL and metadata apply under the request', async () => {
    const t = await native(srv, '/api/v1/templates', {
      method: 'POST',
      body: JSON.stringify({ name: 'py', ttl: '7m', metadata: { from: 'template' } }),
    });
    expect(t.status).toBe(201);
    const sbx = await Sandbox.create('py', { ...sdk, metadata: { mine: 'yes' } });
    const info = await sbx.getInfo();
    expect(info).toMatchObject({ templateId: 'py', name: 'py', metadata: { from: 'template', mine: 'yes' } });
    const rec = await srv.plane.deps.store.getSandbox(sbx.sandboxId);
    expect(rec?.template).toBe('py');
  });

  it(
    'pauses and resumes through the SDK: paused in the list, connect resumes it, a second pause or a resume ' + 'of a running one is 409',
    async () => {
      const sbx = await Sandbox.create({ ...sdk, metadata: { pausing: 'yes' } });
      await sbx.pause();
      expect((await srv.plane.deps.store.getSandbox(sbx.sandboxId))?.state).toBe('paused');
      const paused = await Sandbox.list({ ...sdk, query: { state: ['paused'], metadata: { pausing: 'yes' } } }).nextItems();
      expect(paused.map((x) => [x.sandboxId, x.state])).toEqual([[sbx.sandboxId, 'paused']]);
      const again = await native(srv, `/e2b/sandboxes/${sbx.sandboxId}/pause`, { method: 'POST', body: '{}' });
      expect(again).toMatchObject({ status: 409, body: { code: 409 } });
      const connected = await Sandbox.connect(sbx.sandboxId, sdk);
      expect(connected.sandboxId).toBe(sbx.sandboxId);
      expect((await srv.plane.deps.store.getSandbox(sbx.sandboxId))?.state).toBe('running');
      const resume = await native(srv, `/e2b/sandboxes/${sbx.sandboxId}/resume`, { method: 'POST', body: '{}' });
      expect(resume).toMatchObject({ status: 409, body: { code: 409 } });
      // autoPause maps to on_expire: pause (DESIGN.md §16).
      const auto = await native(srv, '/e2b/sandboxes', { method: 'POST', body: '{"templateID":"base","autoPause":true,"timeout":30}' });
      expect(auto.status).toBe(201);
      expect((await srv.plane.deps.store.getSandbox((auto.body as { sandboxID: string }).sandboxID))?.on_expire).toBe('pause');
    },
  );

  it('answers bad input with E2B-shaped errors and the right status', async () => {
    const cases: Array<[string, string, string | undefined, number]> = [
      ['POST', '/e2b/sandboxes', '{"templateID": "base",', 400],
      ['POST', '/e2b/v2/sandboxes', '{"templateID": "base", "bogus": 1}', 400],
      ['POST', '/e2b/sandboxes', '{"timeout": -5}', 400],
      ['POST', '/e2b/sandboxes', '{"timeout": "soon"}', 400],
      ['POST', '/e2b/sandboxes', '{"timeout": 0}', 400],
      ['POST', '/e2b/sandboxes', '{"metadata": {"a": 1}}', 400],
      ['POST', '/e2b/sandboxes', '{"envVars": {"BAD NAME": "x"}}', 400],
      ['POST', '/e2b/sandboxes', '{"autoPauseMemory": true}', 400],
      ['POST', '/e2b/sandboxes', '{"mcp": {"x": {}}}', 400],
      ['GET', '/e2b/v2/sandboxes?state=sleeping', undefined, 400],
      ['GET', '/e2b/v2/sandboxes?limit=0', undefined, 400],
      ['GET', '/e2b/v2/sandboxes?nextToken=forged', undefined, 400],
      ['POST', '/e2b/sandboxes/x/timeout', '{}', 400],
      ['GET', '/e2b/no/such/route', undefined, 404],
    ];
    for (const [method, path, body, status] of cases) {
      const res = await native(srv, path, { method, ...(body !== undefined ? { body } : {}) });
      expect({ path, body, status: res.status }).toEqual({ path, body, status });
      expect(res.body).toEqual({ code: status, message: expect.any(String) });
    }
    // autoPause: false is E2B's default and is accepted.
    const ok = await native(srv, '/e2b/sandboxes', { method: 'POST', body: '{"templateID":"base","autoPause":false,"timeout":30}' });
    expect(ok.status).toBe(201);
    expect(ok.body).toMatchObject({ templateID: 'base', envdVersion: '0.5.7', trafficAccessToken: null });
    expect(ok.body!.domain).toBe(`localhost:${new URL(srv.url).port}`);
  });

  it('refreshes keep a sandbox alive at least that long, never shorter; bad durations are 400', async () => {
    const sbx = await Sandbox.create({ ...sdk, timeoutMs: 60_000 });
    const path = `/e2b/sandboxes/${sbx.sandboxId}/refreshes`;
    expect((await native(srv, path, { method: 'POST', body: '{"duration": 3000}' })).status).toBe(204);
    expect((await sbx.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(2_900_000);
    expect((await native(srv, path, { method: 'POST', body: '{"duration": 10}' })).status).toBe(204);
    expect((await sbx.getInfo()).endAt.getTime() - Date.now()).toBeGreaterThan(2_900_000);
    expect(await native(srv, path, { method: 'POST', body: '{"duration": 3601}' })).toMatchObject({ status: 400, body: { code: 400 } });
    expect(await native(srv, '/e2b/sandboxes/missing/refreshes', { method: 'POST', body: '{}' })).toMatchObject({
      status: 404,
      body: { code: 404 },
    });
  });

  it('keeps the dev-box guard: a foreign Origin is refused', async () => {
    const res = await native(srv, '/e2b/v2/sandboxes', { headers: { origin: 'https://evil.example' } });
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ code: 403 });
  });
});

describe('E2B SDK against /e2b (auth on, quotas)', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: KEY }, defaults: { max_sandboxes_per_owner: 1 } });
  });
  afterAll(async () => srv.close());

  it('a wrong key raises AuthenticationError; the right key gets an envd access token', async () => {
    const wrong = sdkFor(srv, 'e2b_ffffffffffffffffffffffffffffffffffffffff');
    await expect(Sandbox.create(wrong)).rejects.toBeInstanceOf(AuthenticationError);
    await expect(Sandbox.list(wrong).nextItems()).rejects.toBeInstanceOf(AuthenticationError);

    const sdk = sdkFor(srv);
    const sbx = await Sandbox.create({ ...sdk, metadata: { who: 'me' } });
    const created = await native(srv, `/e2b/sandboxes/${sbx.sandboxId}/connect`, { method: 'POST', body: '{"timeout": 10}' });
    expect(created.status).toBe(200);
    const token = created.body!.envdAccessToken;
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // Stored only as a seed: neither the token nor the seed appears in any native answer.
    const rec = await srv.plane.deps.store.getSandbox(sbx.sandboxId);
    expect(rec?.access_token_seed).toMatch(/^[0-9a-f]{32}$/);
    const nativeAnswer = JSON.stringify((await native(srv, `/api/v1/sandboxes/${sbx.sandboxId}`)).body);
    expect(nativeAnswer).not.toContain(String(token));
    expect(nativeAnswer).not.toContain(rec!.access_token_seed!);

    // The owner quota (1) refuses the second one: 429, the SDK's RateLimitError.
    await expect(Sandbox.create(sdk)).rejects.toBeInstanceOf(RateLimitError);
    expect(srv.plane.deps.bus.recent({ types: ['resource.limit'] }).length).toBeGreaterThan(0);
    await sbx.kill();
  });
});

describe('E2B SDK against /e2b in pool mode', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ pool: { enabled: true, max_vms: 1, max_users_per_vm: 2 } });
  });
  afterAll(async () => srv.close());

  it('needs X-User-ID (400 without, as native); with it the owner is that user and an envd token is issued', async () => {
    const sdk = sdkFor(srv);
    const err = await Sandbox.create(sdk).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError & { statusCode?: number }).statusCode).toBe(400);
    const sbx = await Sandbox.create({ ...sdk, headers: { 'X-User-ID': 'alice' } });
    const got = await native(srv, `/api/v1/sandboxes/${sbx.sandboxId}`, { headers: { 'x-user-id': 'alice' } });
    expect(got.body).toMatchObject({ id: sbx.sandboxId, owner_id: 'alice' });
    // Another tenant does not see it through /e2b either.
    await expect(Sandbox.getInfo(sbx.sandboxId, { ...sdk, headers: { 'X-User-ID': 'bob' } })).rejects.toBeInstanceOf(NotFoundError);
    expect(await Sandbox.list({ ...sdk, headers: { 'X-User-ID': 'bob' } }).nextItems()).toEqual([]);
    expect((await srv.plane.deps.store.getSandbox(sbx.sandboxId))?.access_token_seed).toMatch(/^[0-9a-f]{32}$/);
    expect(await Sandbox.kill(sbx.sandboxId, { ...sdk, headers: { 'X-User-ID': 'alice' } })).toBe(true);
  });
});

describe('E2B SDK against /e2b with the rate limit on', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ rate_limit: { enabled: true, requests_per_minute: 60, burst: 2, key_by: 'api_key' } });
  });
  afterAll(async () => srv.close());

  it('counts /e2b requests in the same bucket as /api/v1: past the burst the SDK raises RateLimitError', async () => {
    const sdk = sdkFor(srv);
    expect((await native(srv, '/api/v1/sandboxes')).status).toBe(200);
    expect(await Sandbox.list(sdk).nextItems()).toEqual([]);
    const err = await Sandbox.list(sdk)
      .nextItems()
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
  });
});

describe('server.e2b: false', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ server: { e2b: false } });
  });
  afterAll(async () => srv.close());

  it('answers 404 under /e2b', async () => {
    expect((await native(srv, '/e2b/v2/sandboxes')).status).toBe(404);
    expect((await native(srv, '/e2b/sandboxes', { method: 'POST', body: '{}' })).status).toBe(404);
  });
});
