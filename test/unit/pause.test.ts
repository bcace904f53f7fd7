/**
 * Pause and resume (DESIGN.md §16) in the unit tier: the whole app through `app.inject` over the
 * in-memory provider and fake timers. State transitions, 409 while an exec is in flight, the
 * transparent resume of an exec, auto-pause after idleness, `on_expire: pause` then destroy after
 * `paused_ttl`, quota counts of paused sandboxes, pool mode's 501, and the events.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { SbxEvent } from '../../src/core/events/kinds.js';
import { fakeClock, startUnitPlane, type UnitPlane } from '../helpers/unit-plane.js';

const T0 = Date.UTC(2030, 0, 1);
const api = (id: string) => `/api/v1/sandboxes/${id}`;

async function spawn(u: UnitPlane, body: unknown = {}, headers: Record<string, string> = {}) {
  const res = await u.req('POST', '/api/v1/sandboxes', body, headers);
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; state: string; expires_at: string; created_at: string; auto_pause?: string; on_expire?: string };
}

const events = (u: UnitPlane, id: string, type: string): SbxEvent[] =>
  u.plane.deps.bus.recent().filter((e) => e.sandbox_id === id && e.type === type);

/** Moves the fake clock 1 ms at a time until the sandbox's exec has started (at most 2 s). */
async function execStarted(u: UnitPlane, id: string): Promise<void> {
  for (let i = 0; i < 2_000 && events(u, id, 'exec.started').length === 0; i++) await vi.advanceTimersByTimeAsync(1);
  expect(events(u, id, 'exec.started').length).toBeGreaterThan(0);
}

describe('pause and resume', () => {
  let u: UnitPlane;
  beforeAll(async () => {
    fakeClock(T0);
    u = await startUnitPlane({ defaults: { max_ttl: '48h', paused_ttl: '1h' } });
  });
  afterAll(async () => {
    await u?.close();
    vi.useRealTimers();
  });

  it('pause → paused (GET, list, events), resume → running; both idempotent', async () => {
    const s = await spawn(u);
    const p = await u.req('POST', `${api(s.id)}/pause`);
    expect(p.status, p.text).toBe(200);
    expect(p.body.state).toBe('paused');
    expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
    const listed = (await u.req('GET', '/api/v1/sandboxes')).body as Array<{ id: string; state: string }>;
    expect(listed.find((x) => x.id === s.id)?.state).toBe('paused');
    expect(await u.provider.status(s.id)).toBe('paused');
    // Twice is the same answer, one event.
    expect((await u.req('POST', `${api(s.id)}/pause`)).body.state).toBe('paused');
    expect(events(u, s.id, 'sandbox.paused')).toHaveLength(1);
    expect(events(u, s.id, 'sandbox.paused')[0]!.data).toMatchObject({ reason: 'requested', provider: 'memory' });

    const r = await u.req('POST', `${api(s.id)}/resume`);
    expect(r.status).toBe(200);
    expect(r.body.state).toBe('running');
    expect(await u.provider.status(s.id)).toBe('running');
    expect((await u.req('POST', `${api(s.id)}/resume`)).body.state).toBe('running');
    expect(events(u, s.id, 'sandbox.resumed')).toHaveLength(1);
    expect(events(u, s.id, 'sandbox.resumed')[0]!.data).toMatchObject({ reason: 'requested' });
  });

  it('unknown and destroyed sandboxes are 404', async () => {
    expect((await u.req('POST', `${api('sb-nope')}/pause`)).status).toBe(404);
    const s = await spawn(u);
    await u.req('DELETE', api(s.id));
    expect((await u.req('POST', `${api(s.id)}/pause`)).status).toBe(404);
    expect((await u.req('POST', `${api(s.id)}/resume`)).status).toBe(404);
  });

  it('an exec, a file operation and a process call on a paused sandbox resume it first, transparently', async () => {
    const s = await spawn(u);
    await u.req('POST', `${api(s.id)}/pause`);
    const ex = await u.req('POST', `${api(s.id)}/exec`, { command: 'echo awake' });
    expect(ex.status, ex.text).toBe(200);
    expect(ex.body.stdout).toBe('awake\n');
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
    expect(events(u, s.id, 'sandbox.resumed')[0]!.data).toMatchObject({ reason: 'activity' });

    await u.req('POST', `${api(s.id)}/pause`);
    const w = await u.req('POST', `${api(s.id)}/files`, { path: '/a.txt', content: 'x' });
    expect(w.status, w.text).toBeLessThan(300);
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');

    await u.req('POST', `${api(s.id)}/pause`);
    const ls = await u.req('GET', `${api(s.id)}/processes`);
    expect(ls.status).toBe(200);
    // Listing processes reads the records only: it does not wake the sandbox; starting one does.
    const started = await u.req('POST', `${api(s.id)}/processes`, { command: 'echo hi' });
    expect(started.status, started.text).toBe(201);
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
  });

  it('an explicit pause while an exec is in flight is 409; after it ends the pause goes through', async () => {
    const s = await spawn(u);
    const running = u.req('POST', `${api(s.id)}/exec`, { command: 'sleep 5; echo done' });
    await execStarted(u, s.id);
    const p = await u.req('POST', `${api(s.id)}/pause`);
    expect(p.status).toBe(409);
    expect(p.body.code).toBe('conflict');
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
    await vi.advanceTimersByTimeAsync(5_000);
    expect((await running).body.stdout).toBe('done\n');
    expect((await u.req('POST', `${api(s.id)}/pause`)).status).toBe(200);
  });

  it('the TTL keeps running while paused (on_expire destroy)', async () => {
    const s = await spawn(u, { ttl: '2m' });
    await u.req('POST', `${api(s.id)}/pause`);
    await vi.advanceTimersByTimeAsync(2 * 60_000 + 11_000);
    expect((await u.req('GET', api(s.id))).status).toBe(404);
    expect(events(u, s.id, 'sandbox.destroyed')).toHaveLength(1);
  });
});

describe('previews and metrics', () => {
  afterEach(() => vi.useRealTimers());

  it('a preview of a paused sandbox is 503 without preview_auth (a scanner cannot wake it); metrics count pauses', async () => {
    fakeClock(T0);
    const u = await startUnitPlane({ server: { preview_domain: 'preview.test' } });
    try {
      const s = await spawn(u);
      await u.req('POST', `${api(s.id)}/pause`);
      // The preview router (transports/preview) asks core for the upstream; inject does not reach the router.
      const preview = u.plane.deps.preview!.service;
      await expect(preview.upstream(s.id, 8080)).rejects.toMatchObject({ code: 'unavailable', message: expect.stringMatching(/paused/) });
      expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
      const text = (await u.req('GET', '/api/v1/metrics/prometheus')).text;
      expect(text).toMatch(/sbx_sandbox_pauses_total\{reason="requested"\} 1/);
      expect(text).toMatch(/sbx_sandboxes\{state="paused"\} 1/);
      await u.req('POST', `${api(s.id)}/resume`);
      expect((await u.req('GET', '/api/v1/metrics/prometheus')).text).toMatch(/sbx_sandbox_resume_seconds_count\{reason="requested"\} 1/);
    } finally {
      await u.close();
    }
  });

  it('with preview_auth on, a preview (its token checked by the router) resumes a paused sandbox', async () => {
    fakeClock(T0);
    const u = await startUnitPlane({ server: { preview_domain: 'preview.test', preview_auth: true } });
    try {
      const s = await spawn(u);
      await u.req('POST', `${api(s.id)}/pause`);
      // The router checks the token before it asks core (transports/preview/router.ts); core then resumes.
      const preview = u.plane.deps.preview!.service;
      // The memory provider has no previews (501), but the sandbox was resumed first.
      await expect(preview.upstream(s.id, 8080)).rejects.toMatchObject({ code: 'not_implemented' });
      expect((await u.req('GET', api(s.id))).body.state).toBe('running');
      expect(events(u, s.id, 'sandbox.resumed')[0]!.data).toMatchObject({ reason: 'activity' });
    } finally {
      await u.close();
    }
  });
});

describe('quotas', () => {
  afterEach(() => vi.useRealTimers());

  it('paused sandboxes count against the owner quota', async () => {
    fakeClock(T0);
    const u = await startUnitPlane({ defaults: { max_sandboxes_per_owner: 2 } });
    try {
      const h = { 'x-user-id': 'quota-owner' };
      const a = await spawn(u, {}, h);
      expect((await u.req('POST', `${api(a.id)}/pause`, undefined, h)).body.state).toBe('paused');
      await spawn(u, {}, h);
      const third = await u.req('POST', '/api/v1/sandboxes', {}, h);
      expect(third.status).toBe(429);
      expect(third.body.code).toBe('resource_limit');
      const usage = await u.req('GET', '/api/v1/admin/quotas/quota-owner/usage');
      expect(usage.body.active_sandboxes).toBe(2);
    } finally {
      await u.close();
    }
  });
});

describe('auto_pause', () => {
  let u: UnitPlane;
  beforeAll(async () => {
    fakeClock(T0);
    u = await startUnitPlane({ defaults: { max_ttl: '48h' } });
  });
  afterAll(async () => {
    await u?.close();
    vi.useRealTimers();
  });

  it('pauses after the window without activity; the next exec resumes it; GET is no activity', async () => {
    const s = await spawn(u, { auto_pause: '30s' });
    expect(s.auto_pause).toBe('30s');
    await vi.advanceTimersByTimeAsync(20_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
    await vi.advanceTimersByTimeAsync(11_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
    expect(events(u, s.id, 'sandbox.paused')[0]!.data).toMatchObject({ reason: 'auto_pause' });
    expect((await u.req('POST', `${api(s.id)}/exec`, { command: 'echo back' })).body.stdout).toBe('back\n');
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
  });

  it('activity holds it off: the window counts from the end of the last exec', async () => {
    const s = await spawn(u, { auto_pause: '30s' });
    await vi.advanceTimersByTimeAsync(20_000);
    const ex = u.req('POST', `${api(s.id)}/exec`, { command: 'sleep 25' });
    await execStarted(u, s.id);
    await vi.advanceTimersByTimeAsync(25_000);
    await ex;
    // 45 s after spawn, the exec ended 0 s ago: still running after 20 more seconds.
    await vi.advanceTimersByTimeAsync(20_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
    await vi.advanceTimersByTimeAsync(11_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
  });

  it('a long exec in flight is never auto-paused', async () => {
    const s = await spawn(u, { auto_pause: '10s' });
    const ex = u.req('POST', `${api(s.id)}/exec`, { command: 'sleep 60; echo ok' });
    await execStarted(u, s.id);
    await vi.advanceTimersByTimeAsync(59_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('running');
    await vi.advanceTimersByTimeAsync(1_000);
    expect((await ex).body.stdout).toBe('ok\n');
  });

  it('a bad auto_pause is 400; 0s means never', async () => {
    expect((await u.req('POST', '/api/v1/sandboxes', { auto_pause: 'soon' })).status).toBe(400);
    expect((await u.req('POST', '/api/v1/sandboxes', { on_expire: 'later' })).status).toBe(400);
    const s = await spawn(u, { auto_pause: '0s' });
    expect(s.auto_pause).toBeUndefined();
  });

  it('a template carries auto_pause and on_expire to its spawns', async () => {
    const t = await u.req('POST', '/api/v1/templates', { name: 'napper', auto_pause: '1m', on_expire: 'pause' });
    expect(t.status, t.text).toBe(201);
    expect(t.body).toMatchObject({ auto_pause: '1m', on_expire: 'pause' });
    const s = await u.req('POST', '/api/v1/templates/napper/spawn', {});
    expect(s.status, s.text).toBe(201);
    expect(s.body).toMatchObject({ auto_pause: '1m0s', on_expire: 'pause' });
  });
});

describe('defaults.auto_pause', () => {
  afterEach(() => vi.useRealTimers());

  it('applies to spawns that name none', async () => {
    fakeClock(T0);
    const u = await startUnitPlane({ defaults: { auto_pause: '1m' } });
    try {
      const s = await spawn(u);
      await vi.advanceTimersByTimeAsync(61_000);
      expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
    } finally {
      await u.close();
    }
  });
});

describe('on_expire: pause', () => {
  let u: UnitPlane;
  beforeAll(async () => {
    fakeClock(T0);
    u = await startUnitPlane({ defaults: { max_ttl: '48h', paused_ttl: '1h' } });
  });
  afterAll(async () => {
    await u?.close();
    vi.useRealTimers();
  });

  it('pauses at the TTL, is destroyed paused_ttl later', async () => {
    const s = await spawn(u, { ttl: '5m', on_expire: 'pause' });
    expect(s.on_expire).toBe('pause');
    expect(Date.parse(s.expires_at) - Date.parse(s.created_at)).toBe(5 * 60_000 + 3_600_000);
    await vi.advanceTimersByTimeAsync(5 * 60_000 + 11_000);
    const g = await u.req('GET', api(s.id));
    expect(g.body.state).toBe('paused');
    expect(events(u, s.id, 'sandbox.paused')[0]!.data).toMatchObject({ reason: 'on_expire' });
    await vi.advanceTimersByTimeAsync(3_600_000);
    expect((await u.req('GET', api(s.id))).status).toBe(404);
    expect(events(u, s.id, 'sandbox.destroyed')).toHaveLength(1);
  });

  it('a resume gives a fresh TTL', async () => {
    const s = await spawn(u, { ttl: '5m', on_expire: 'pause' });
    await vi.advanceTimersByTimeAsync(5 * 60_000 + 11_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
    await vi.advanceTimersByTimeAsync(30 * 60_000);
    const r = await u.req('POST', `${api(s.id)}/resume`);
    expect(r.body.state).toBe('running');
    expect(Date.parse(r.body.pause_at)).toBe(Date.now() + 5 * 60_000);
    expect(Date.parse(r.body.expires_at)).toBe(Date.now() + 5 * 60_000 + 3_600_000);
    // Past the old paused life: alive, and paused again at the new TTL.
    await vi.advanceTimersByTimeAsync(31 * 60_000);
    expect((await u.req('GET', api(s.id))).body.state).toBe('paused');
  });
});

describe('pool mode', () => {
  afterEach(() => vi.useRealTimers());

  it('pause and resume are 501; auto_pause and on_expire pause too', async () => {
    fakeClock(T0);
    const u = await startUnitPlane({ pool: { enabled: true, provider: 'memory' } });
    try {
      const h = { 'x-user-id': 'tenant-a' };
      const s = await spawn(u, {}, h);
      const p = await u.req('POST', `${api(s.id)}/pause`, undefined, h);
      expect(p.status).toBe(501);
      expect(p.body.code).toBe('not_implemented');
      expect((await u.req('POST', `${api(s.id)}/resume`, undefined, h)).status).toBe(501);
      expect((await u.req('POST', '/api/v1/sandboxes', { auto_pause: '1m' }, h)).status).toBe(501);
      expect((await u.req('POST', '/api/v1/sandboxes', { on_expire: 'pause' }, h)).status).toBe(501);
    } finally {
      await u.close();
    }
  });
});
