/**
 * Secrets (DESIGN.md §15) in the unit tier: the API through `app.inject` over the in-memory
 * provider and SQLite in memory. CRUD, validation (nothing stored on a 400), owner scoping and
 * admins' `?owner_id=`, binding at spawn (network `filtered` only, the spawner's namespace), the
 * placeholder in every command's environment, the fingerprint, and the control plane's SecretSource.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SpawnSpec } from '../../../src/core/ports/index.js';
import { PLACEHOLDER_PATTERN } from '../../../src/core/secrets/port.js';
import { fakeClock, startUnitPlane, type UnitPlane } from '../../helpers/unit-plane.js';

let u: UnitPlane;
const ADMIN_KEY = 'secrets-admin-key-4b6d8f0a2c4e6a8b0d2f4a6c';
const ADMIN = { 'x-admin-api-key': ADMIN_KEY };
const as = (user: string) => ({ 'x-user-id': user });
const VALUE = 'sk-live-0123456789abcdef-VALUE';

beforeAll(async () => {
  fakeClock();
  u = await startUnitPlane({ auth: { admin_api_key: ADMIN_KEY, enforce_ownership: true } });
  // A stand-in enforcer: the memory provider accepts filtered spawns (the docker suite does the real thing).
  const spawn = u.provider.spawn.bind(u.provider);
  Object.assign(u.provider, {
    egress: { unavailable: () => null, changed: () => undefined },
    spawn: async (spec: SpawnSpec, signal?: AbortSignal) => {
      const { network, ...rest } = spec;
      return { ...(await spawn(rest, signal)), ...(network ? { network } : {}) };
    },
  });
});
afterAll(async () => {
  await u?.close();
  vi.useRealTimers();
});

const create = (user: string, body: Record<string, unknown>) => u.req('POST', '/api/v1/secrets', body, as(user));
const spawn = (user: string, body: Record<string, unknown>) => u.req('POST', '/api/v1/sandboxes', body, as(user));
const env = async (user: string, id: string, name: string) => {
  const res = await u.req('POST', `/api/v1/sandboxes/${id}/exec`, { command: `echo "$${name}"` }, as(user));
  expect(res.status, res.text).toBe(200);
  return res.body.stdout as string;
};

describe('secrets API', () => {
  it('creates, reads, lists, updates and deletes; the value is never answered', async () => {
    const made = await create('alice', { name: 'API_TOKEN', value: VALUE, hosts: ['API.Example.com.', '*.example.org:443'] });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toEqual({
      name: 'API_TOKEN',
      owner_id: 'alice',
      hosts: ['api.example.com', '*.example.org:443'],
      allow_plain_http: false,
      created_at: expect.any(String),
      updated_at: expect.any(String),
      fingerprint: expect.stringMatching(/^[0-9a-f]{8}$/),
    });
    const got = await u.req('GET', '/api/v1/secrets/API_TOKEN', undefined, as('alice'));
    expect(got.status).toBe(200);
    expect(got.body.fingerprint).toBe(made.body.fingerprint);
    const list = await u.req('GET', '/api/v1/secrets', undefined, as('alice'));
    expect(list.body.map((s: { name: string }) => s.name)).toEqual(['API_TOKEN']);
    expect((await create('alice', { name: 'API_TOKEN', value: 'x', hosts: ['a.test'] })).status).toBe(409);

    const hostsOnly = await u.req('PUT', '/api/v1/secrets/API_TOKEN', { hosts: ['api.example.com'] }, as('alice'));
    expect(hostsOnly.status, hostsOnly.text).toBe(200);
    expect(hostsOnly.body.hosts).toEqual(['api.example.com']);
    expect(hostsOnly.body.fingerprint).toBe(made.body.fingerprint);
    const newValue = await u.req('PUT', '/api/v1/secrets/API_TOKEN', { value: `${VALUE}-rotated`, allow_plain_http: true }, as('alice'));
    expect(newValue.body.fingerprint).not.toBe(made.body.fingerprint);
    expect(newValue.body.allow_plain_http).toBe(true);
    expect((await u.req('PUT', '/api/v1/secrets/API_TOKEN', {}, as('alice'))).status).toBe(400);
    for (const r of [made, got, list, hostsOnly, newValue]) expect(r.text).not.toContain(VALUE);

    expect((await u.req('DELETE', '/api/v1/secrets/API_TOKEN', undefined, as('alice'))).body).toEqual({ status: 'deleted' });
    expect((await u.req('GET', '/api/v1/secrets/API_TOKEN', undefined, as('alice'))).status).toBe(404);
    expect((await u.req('DELETE', '/api/v1/secrets/API_TOKEN', undefined, as('alice'))).status).toBe(404);
  });

  it('refuses bad names, reserved names, big values, bad hosts: 400 and nothing stored', async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ name: 'lower', value: 'v', hosts: ['a.test'] }, /not valid/],
      [{ name: '1ABC', value: 'v', hosts: ['a.test'] }, /not valid/],
      [{ name: `A${'B'.repeat(64)}`, value: 'v', hosts: ['a.test'] }, /not valid/],
      [{ name: 'HTTPS_PROXY', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'NO_PROXY', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'SSL_CERT_FILE', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'NODE_EXTRA_CA_CERTS', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'PATH', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'HOME', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'LD_PRELOAD', value: 'v', hosts: ['a.test'] }, /reserved/],
      [{ name: 'BIG', value: 'x'.repeat(64 * 1024 + 1), hosts: ['a.test'] }, /65537 bytes; at most 65536/],
      [{ name: 'CRLF', value: 'a\r\nX-Evil: 1', hosts: ['a.test'] }, /CR, LF/],
      [{ name: 'EMPTY', value: '', hosts: ['a.test'] }, /empty/],
      [{ name: 'NOHOST', value: 'v', hosts: [] }, /non-empty/],
      [{ name: 'BADHOST', value: 'v', hosts: ['a.*.com'] }, /"a\.\*\.com"/],
      [{ name: 'BADPORT', value: 'v', hosts: ['a.test:99999'] }, /port/],
    ];
    for (const [body, message] of cases) {
      const res = await create('carol', body);
      expect(res.status, `${String(body.name)}: ${res.text}`).toBe(400);
      expect(res.body.code).toBe('bad_request');
      expect(res.body.message).toMatch(message);
    }
    // Exactly 64 KiB is accepted.
    expect((await create('carol', { name: 'MAX', value: 'y'.repeat(64 * 1024), hosts: ['a.test'] })).status).toBe(201);
    const list = await u.req('GET', '/api/v1/secrets', undefined, as('carol'));
    expect(list.body.map((s: { name: string }) => s.name)).toEqual(['MAX']);
  });

  it('keeps owners apart; admins see all and address one with ?owner_id=', async () => {
    expect((await create('dave', { name: 'SHARED_NAME', value: 'dave-value', hosts: ['d.test'] })).status).toBe(201);
    expect((await create('erin', { name: 'SHARED_NAME', value: 'erin-value', hosts: ['e.test'] })).status).toBe(201);
    expect((await u.req('GET', '/api/v1/secrets/SHARED_NAME', undefined, as('dave'))).body.hosts).toEqual(['d.test']);
    expect((await create('erin', { name: 'ERIN_ONLY', value: 'v', hosts: ['e.test'] })).status).toBe(201);
    expect((await u.req('GET', '/api/v1/secrets/ERIN_ONLY', undefined, as('dave'))).status).toBe(404);
    expect((await u.req('DELETE', '/api/v1/secrets/ERIN_ONLY', undefined, as('dave'))).status).toBe(404);
    expect((await u.req('PUT', '/api/v1/secrets/ERIN_ONLY', { value: 'hijack' }, as('dave'))).status).toBe(404);
    // A non-admin cannot reach another namespace with ?owner_id=.
    expect((await u.req('GET', '/api/v1/secrets/ERIN_ONLY?owner_id=erin', undefined, as('dave'))).status).toBe(403);

    const all = await u.req('GET', '/api/v1/secrets', undefined, ADMIN);
    const pairs = all.body.map((s: { owner_id: string; name: string }) => `${s.owner_id}/${s.name}`);
    expect(pairs).toEqual(expect.arrayContaining(['dave/SHARED_NAME', 'erin/SHARED_NAME', 'erin/ERIN_ONLY']));
    const erins = await u.req('GET', '/api/v1/secrets?owner_id=erin', undefined, ADMIN);
    expect(erins.body.map((s: { name: string }) => s.name)).toEqual(['ERIN_ONLY', 'SHARED_NAME']);
    const put = await u.req('PUT', '/api/v1/secrets/ERIN_ONLY?owner_id=erin', { hosts: ['f.test'] }, ADMIN);
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ owner_id: 'erin', hosts: ['f.test'] });
    const made = await u.req('POST', '/api/v1/secrets?owner_id=frank', { name: 'FOR_FRANK', value: 'v', hosts: ['f.test'] }, ADMIN);
    expect(made.status).toBe(201);
    expect((await u.req('GET', '/api/v1/secrets/FOR_FRANK', undefined, as('frank'))).status).toBe(200);
    expect((await u.req('DELETE', '/api/v1/secrets/FOR_FRANK?owner_id=frank', undefined, ADMIN)).status).toBe(200);
    expect((await u.req('GET', '/api/v1/secrets/FOR_FRANK', undefined, as('frank'))).status).toBe(404);
  });

  it('audits create, update and delete without the value', async () => {
    await create('gina', { name: 'AUDITED', value: 'audit-value-9f8e7d', hosts: ['g.test'] });
    await u.req('PUT', '/api/v1/secrets/AUDITED', { value: 'audit-value-rotated' }, as('gina'));
    await u.req('DELETE', '/api/v1/secrets/AUDITED', undefined, as('gina'));
    const audit = await u.req('GET', '/api/v1/admin/audit?path=/api/v1/secrets/AUDITED&limit=100', undefined, ADMIN);
    expect(audit.status, audit.text).toBe(200);
    const rows = (audit.body.records ?? audit.body) as Array<{ method: string; path: string }>;
    expect(rows.map((r) => r.method).sort()).toEqual(['DELETE', 'PUT']);
    const created = await u.req('GET', '/api/v1/admin/audit?path=/api/v1/secrets&method=POST&limit=100', undefined, ADMIN);
    expect(created.text).toContain('/api/v1/secrets');
    expect(audit.text + created.text).not.toContain('audit-value');
  });
});

describe('secret events', () => {
  /** The event stream as `user` sees it (replayed from the start), once `until` shows up (bounded). */
  const stream = async (user: string, until: string) => {
    const res = await u.inject({
      method: 'GET',
      url: '/api/v1/events',
      headers: { 'last-event-id': '0', ...as(user) },
      payloadAsStream: true,
    });
    const body = res.stream();
    let text = '';
    body.on('data', (c: Buffer) => (text += c.toString()));
    for (let i = 0; i < 50 && !text.includes(until); i++) await new Promise((r) => setImmediate(r));
    body.destroy();
    return text;
  };

  it('secret.created, .updated and .deleted carry name, owner and fingerprint, never the value; other owners see none', async () => {
    const value = 'event-value-7a3c5e9b1d';
    const made = await create('kate', { name: 'EVENTED', value, hosts: ['k.test'] });
    expect(made.status, made.text).toBe(201);
    const put = await u.req('PUT', '/api/v1/secrets/EVENTED', { value: `${value}-rotated` }, as('kate'));
    expect(put.status).toBe(200);
    expect((await u.req('DELETE', '/api/v1/secrets/EVENTED', undefined, as('kate'))).status).toBe(200);
    const events = u.plane.deps.bus.since(0).filter((e) => e.type.startsWith('secret.') && e.data?.name === 'EVENTED');
    expect(events.map((e) => [e.type, e.owner_id, e.data])).toEqual([
      ['secret.created', 'kate', { name: 'EVENTED', owner: 'kate', fingerprint: made.body.fingerprint }],
      ['secret.updated', 'kate', { name: 'EVENTED', owner: 'kate', fingerprint: put.body.fingerprint }],
      ['secret.deleted', 'kate', { name: 'EVENTED', owner: 'kate', fingerprint: put.body.fingerprint }],
    ]);
    expect(put.body.fingerprint).not.toBe(made.body.fingerprint);
    expect(JSON.stringify(u.plane.deps.bus.since(0))).not.toContain(value);
    // Through the event stream: the owner sees the three, another owner none of them.
    const own = await stream('kate', 'event: secret.deleted');
    expect(own).toContain('event: secret.created');
    expect(own).toContain('event: secret.updated');
    expect(own).toContain('event: secret.deleted');
    expect(own).not.toContain(value);
    expect((await create('leo', { name: 'LEO_OWN', value: 'leo-value-1', hosts: ['l.test'] })).status).toBe(201);
    const other = await stream('leo', 'LEO_OWN');
    expect(other).toContain('LEO_OWN');
    expect(other).not.toContain('EVENTED');
    // A failed change publishes nothing.
    const before = u.plane.deps.bus.since(0).length;
    expect((await u.req('DELETE', '/api/v1/secrets/EVENTED', undefined, as('kate'))).status).toBe(404);
    expect((await create('kate', { name: 'bad name', value, hosts: ['k.test'] })).status).toBe(400);
    expect(
      u.plane.deps.bus
        .since(0)
        .slice(before)
        .filter((e) => e.type.startsWith('secret.')),
    ).toEqual([]);
  });
});

describe('binding secrets to sandboxes', () => {
  beforeAll(async () => {
    expect((await create('hank', { name: 'TOKEN', value: 'hank-token-value', hosts: ['api.example.com'] })).status).toBe(201);
    expect((await create('ivy', { name: 'IVY_TOKEN', value: 'ivy-token-value', hosts: ['api.example.com'] })).status).toBe(201);
  });

  it('needs network filtered: another network → 400 naming network, nothing spawned', async () => {
    for (const network of ['bridge', 'none']) {
      const res = await spawn('hank', { network, secrets: ['TOKEN'] });
      expect(res.status, res.text).toBe(400);
      expect(res.body.message).toMatch(/network "filtered"/);
    }
    const unset = await spawn('hank', { secrets: ['TOKEN'] });
    expect(unset.status).toBe(400);
    expect(unset.body.message).toMatch(/network/);
    expect((await u.req('GET', '/api/v1/sandboxes', undefined, as('hank'))).body).toEqual([]);
  });

  it("an unknown name, or another owner's, is 400 naming it as unknown", async () => {
    const missing = await spawn('hank', { network: 'filtered', secrets: ['NOPE'] });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/unknown secret NOPE/);
    const foreign = await spawn('hank', { network: 'filtered', secrets: ['IVY_TOKEN'] });
    expect(foreign.status).toBe(400);
    expect(foreign.body.message).toMatch(/unknown secret IVY_TOKEN/);
    expect((await spawn('hank', { network: 'filtered', secrets: ['lower'] })).status).toBe(400);
  });

  it('puts a placeholder, different per sandbox, into every command; the source gives the value', async () => {
    const a = await spawn('hank', { network: 'filtered', egress: { allow: ['api.example.com'] }, secrets: ['TOKEN'] });
    const b = await spawn('hank', { egress: { allow: ['api.example.com'] }, secrets: ['TOKEN'] });
    expect(a.status, a.text).toBe(201);
    expect(b.status, b.text).toBe(201);
    expect(a.text + b.text).not.toContain('hank-token-value');
    const pa = (await env('hank', a.body.id, 'TOKEN')).trim();
    const pb = (await env('hank', b.body.id, 'TOKEN')).trim();
    expect(pa).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(pb).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(pa).not.toBe(pb);
    const source = u.plane.deps.secretService!;
    const bound = await source.forSandbox(a.body.id);
    expect(bound).toHaveLength(1);
    expect(bound[0]).toMatchObject({ name: 'TOKEN', placeholder: pa, value: 'hank-token-value', allowPlainHttp: false });
    expect(bound[0]!.hosts.map((h) => h.text)).toEqual(['api.example.com']);
    expect(pa.match(PLACEHOLDER_PATTERN)).toEqual([pa]);

    // Rotation and deletion apply within the source's second of cache.
    await u.req('PUT', '/api/v1/secrets/TOKEN', { value: 'hank-token-rotated' }, as('hank'));
    expect((await source.forSandbox(a.body.id))[0]!.value).toBe('hank-token-rotated');
    // Destroyed: nothing bound any more.
    await u.req('DELETE', `/api/v1/sandboxes/${b.body.id}`, undefined, as('hank'));
    await vi.advanceTimersByTimeAsync(1_100);
    expect(await source.forSandbox(b.body.id)).toEqual([]);
    await u.req('DELETE', '/api/v1/secrets/TOKEN', undefined, as('hank'));
    expect(await source.forSandbox(a.body.id)).toEqual([]);
  });

  it('a fork gets its own placeholders: bindings copied with fresh ones, its env read from them, dropped on failure', async () => {
    expect((await create('liam', { name: 'FORKED', value: 'liam-fork-value', hosts: ['f.test'] })).status).toBe(201);
    const parent = await spawn('liam', { egress: { allow: ['f.test'] }, secrets: ['FORKED'] });
    const child = await spawn('liam', { egress: { allow: ['f.test'] } });
    expect(parent.status, parent.text).toBe(201);
    const source = u.plane.deps.secretService!;
    const [bound] = await source.forSandbox(parent.body.id);
    await source.copyBindings(parent.body.id, child.body.id);
    const [copied] = await source.forSandbox(child.body.id);
    expect(copied).toMatchObject({ name: 'FORKED', value: 'liam-fork-value' });
    expect(copied!.placeholder).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    expect(copied!.placeholder).not.toBe(bound!.placeholder);
    // A copy of the parent's environment gets the child's own placeholder, never the parent's.
    expect(await source.placeholderEnv(child.body.id, { FORKED: bound!.placeholder, OTHER: 'x' })).toEqual({
      FORKED: copied!.placeholder,
    });
    expect(await source.placeholderEnv(child.body.id, { OTHER: 'x' })).toEqual({});
    await source.dropBindings(child.body.id);
    await vi.advanceTimersByTimeAsync(1_100);
    expect(await source.forSandbox(child.body.id)).toEqual([]);
    expect(await source.placeholderEnv(child.body.id, { FORKED: bound!.placeholder })).toEqual({ FORKED: '' });
  });

  it("a template's secrets resolve in the spawner's namespace", async () => {
    expect((await create('jack', { name: 'TPL_TOKEN', value: 'jack-tpl-value', hosts: ['t.test'] })).status).toBe(201);
    const bad = await u.req('POST', '/api/v1/templates', { name: 'tpl-bridge', network: 'bridge', secrets: ['TPL_TOKEN'] });
    expect(bad.status).toBe(400);
    expect(bad.body.message).toMatch(/network "filtered"/);
    const tpl = await u.req('POST', '/api/v1/templates', { name: 'tpl-secret', network: 'filtered', secrets: ['TPL_TOKEN'] });
    expect(tpl.status, tpl.text).toBe(201);
    expect(tpl.body.secrets).toEqual(['TPL_TOKEN']);
    const mine = await u.req('POST', '/api/v1/templates/tpl-secret/spawn', {}, as('jack'));
    expect(mine.status, mine.text).toBe(201);
    expect((await env('jack', mine.body.id, 'TPL_TOKEN')).trim()).toMatch(/^sbx_secret_[0-9a-f]{32}$/);
    const other = await u.req('POST', '/api/v1/templates/tpl-secret/spawn', {}, as('kate'));
    expect(other.status).toBe(400);
    expect(other.body.message).toMatch(/unknown secret TPL_TOKEN/);
  });
});
