import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditRecord } from '../../src/core/ports/index.js';
import { pruneAudit, startAuditPruner } from '../../src/transports/http/plugins/audit.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

const API_KEY = 'audit-user-key-4d6f8a0c2e4b6d8f0a2c4e6b';
const ADMIN_KEY = 'audit-admin-key-6f8a0c2e4b6d8f0a2c4e6b8d';
const admin = (user?: string) => ({ 'x-admin-api-key': ADMIN_KEY, ...(user ? { 'x-user-id': user } : {}) });

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer({ auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY } });
});
afterAll(async () => srv?.close());

const audit = async (query = '') => (await call<AuditRecord[]>(srv.url, 'GET', `/api/v1/admin/audit${query}`, undefined, admin())).body;

describe('admin aliases (spec 4.9)', () => {
  it('providers alias has the plain route’s shape', async () => {
    const plain = await call(srv.url, 'GET', '/api/v1/providers', undefined, { 'x-api-key': API_KEY });
    const alias = await call(srv.url, 'GET', '/api/v1/admin/providers', undefined, admin());
    expect(alias.status).toBe(200);
    expect(alias.body.map((p: { name: string }) => p.name)).toEqual(plain.body.map((p: { name: string }) => p.name));
    expect(alias.body[0]).toMatchObject({ name: 'mock', healthy: true, default: true });
    const detail = await call(srv.url, 'GET', '/api/v1/admin/providers/mock', undefined, admin());
    expect(detail.body).toMatchObject({ name: 'mock', healthy: true, sandbox_count: 0 });
    expect((await call(srv.url, 'GET', '/api/v1/admin/providers/nope', undefined, admin())).status).toBe(404);
    expect((await call(srv.url, 'POST', '/api/v1/admin/providers/test', undefined, admin())).body).toEqual({ mock: true });
  });

  it('observability aliases answer', async () => {
    expect((await call(srv.url, 'GET', '/api/v1/admin/diagnostics', undefined, admin())).status).toBe(200);
    expect((await call(srv.url, 'GET', '/api/v1/admin/metrics', undefined, admin())).status).toBe(200);
    const prom = await call(srv.url, 'GET', '/api/v1/admin/metrics/prometheus', undefined, admin());
    expect(prom.status).toBe(200);
    expect(prom.text).toMatch(/^# (HELP|TYPE) sbx_/m);
    for (const s of [API_KEY, ADMIN_KEY]) expect(prom.text).not.toContain(s);
  });

  it('admin worker heartbeat and delete', async () => {
    const hb = await call(
      srv.url,
      'POST',
      '/api/v1/admin/workers/w-admin/heartbeat',
      { hostname: 'h1', providers: ['mock'], capacity: { max_sandboxes: 4 } },
      admin(),
    );
    expect(hb.status).toBe(200);
    expect(hb.body).toMatchObject({ id: 'w-admin', hostname: 'h1', status: 'online', providers: ['mock'], stale: false });
    expect(hb.body.capacity.max_sandboxes).toBe(4);
    const listed = await call(srv.url, 'GET', '/api/v1/workers/w-admin', undefined, { 'x-api-key': API_KEY });
    expect(listed.body.hostname).toBe('h1');
    expect((await call(srv.url, 'POST', '/api/v1/admin/workers/w-admin/heartbeat', {}, admin())).status).toBe(400);
    expect((await call(srv.url, 'DELETE', '/api/v1/admin/workers/w-admin', undefined, admin())).body).toEqual({ status: 'deleted' });
    expect((await call(srv.url, 'DELETE', '/api/v1/admin/workers/w-admin', undefined, admin())).status).toBe(404);
    expect((await call(srv.url, 'GET', '/api/v1/workers/w-admin', undefined, { 'x-api-key': API_KEY })).status).toBe(404);
  });
});

describe('admin audit history', () => {
  it('records every admin request, allowed or refused, with the credential kind and never a key', async () => {
    const before = new Date().toISOString();
    await call(srv.url, 'GET', '/api/v1/admin/providers?x=1', undefined, { ...admin('ops'), 'user-agent': 'audit-test/1.0' });
    await call(srv.url, 'GET', '/api/v1/admin/providers', undefined, { 'x-api-key': API_KEY, 'x-user-id': 'mallory' });
    await call(srv.url, 'DELETE', '/api/v1/admin/workers/nobody', undefined, {});
    await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'x-api-key': API_KEY }); // not an admin route

    const rows = await audit(`?since=${encodeURIComponent(before)}`);
    expect(rows.map((r) => `${r.actor} ${r.method} ${r.path} ${r.status}`)).toEqual([
      'anonymous DELETE /api/v1/admin/workers/nobody 401',
      'api-key:mallory GET /api/v1/admin/providers 403',
      'admin-key:ops GET /api/v1/admin/providers 200',
    ]);
    const ok = rows[2]!;
    expect(ok.user_agent).toBe('audit-test/1.0');
    expect(ok.remote_addr).toBe('127.0.0.1');
    expect(ok.request_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(ok.duration_ms).toBeGreaterThanOrEqual(0);
    expect(Date.parse(ok.created_at)).toBeGreaterThanOrEqual(Date.parse(before));
    const text = JSON.stringify(await audit('?limit=1000'));
    for (const s of [API_KEY, ADMIN_KEY]) expect(text).not.toContain(s);
  });

  it('filters by actor, method, status, path prefix, time range and limit', async () => {
    const since = new Date().toISOString();
    await call(srv.url, 'POST', '/api/v1/admin/providers/test', undefined, { ...admin('f1'), 'x-request-id': 'req-filter-1' });
    await call(srv.url, 'GET', '/api/v1/admin/providers/mock', undefined, admin('f1'));
    await call(srv.url, 'GET', '/api/v1/admin/providers/nope', undefined, admin('f2'));
    const q = (s: string) => audit(`?since=${encodeURIComponent(since)}&${s}`);

    expect((await q('actor=admin-key:f1')).map((r) => r.path)).toEqual(['/api/v1/admin/providers/mock', '/api/v1/admin/providers/test']);
    // A prefix: the credential kind alone finds every user who used it.
    // (The audit queries themselves are recorded as plain `admin-key`, hence the path filter.)
    expect((await q('actor=admin-key&path=/api/v1/admin/providers')).map((r) => r.actor)).toEqual([
      'admin-key:f2',
      'admin-key:f1',
      'admin-key:f1',
    ]);
    expect((await q('actor=admin-key:f')).length).toBe(3);
    expect(await q('actor=api-key')).toEqual([]);
    expect((await q('method=post')).map((r) => r.request_id)).toEqual(['req-filter-1']);
    expect((await q('status=404')).map((r) => r.actor)).toEqual(['admin-key:f2']);
    expect((await q('path=/api/v1/admin/providers/m')).length).toBe(1);
    expect((await q('limit=2')).length).toBe(2);
    expect(await audit(`?until=${encodeURIComponent('2000-01-01T00:00:00Z')}`)).toEqual([]);
    const bad = await call(srv.url, 'GET', '/api/v1/admin/audit?since=yesterday', undefined, admin());
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('bad_request');
    expect((await call(srv.url, 'GET', '/api/v1/admin/audit?format=xml', undefined, admin())).status).toBe(400);
  });

  it('exports CSV with a header row and proper quoting', async () => {
    const since = new Date().toISOString();
    await call(srv.url, 'GET', '/api/v1/admin/providers', undefined, { ...admin('csv'), 'user-agent': 'agent, with "quotes"' });
    await call(srv.url, 'GET', '/api/v1/admin/providers', undefined, { ...admin('csv'), 'user-agent': '=cmd|calc' });
    const res = await fetch(`${srv.url}/api/v1/admin/audit?format=csv&actor=admin-key:csv&since=${encodeURIComponent(since)}`, {
      headers: admin(),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    const lines = (await res.text()).split('\r\n');
    expect(lines[0]).toBe('id,created_at,actor,method,path,status,duration_ms,request_id,remote_addr,user_agent');
    expect(lines).toHaveLength(4);
    expect(lines[3]).toBe('');
    // Newest first; two requests in one millisecond may come in either order.
    const rows = lines.slice(1, 3);
    expect(
      rows.filter((l) =>
        /^[0-9a-f-]{36},\d{4}-[^,]+,admin-key:csv,GET,\/api\/v1\/admin\/providers,200,\d+,[^,]+,127\.0\.0\.1,'=cmd\|calc$/.test(l),
      ),
    ).toHaveLength(1);
    expect(rows.filter((l) => /,"agent, with ""quotes"""$/.test(l))).toHaveLength(1);
  });

  it('prunes records older than the retention', async () => {
    const { store, clock } = srv.plane.deps;
    const old = (id: string, daysAgo: number): AuditRecord => ({
      id,
      created_at: new Date(Date.now() - daysAgo * 86_400_000).toISOString(),
      actor: 'admin-key',
      method: 'GET',
      path: '/api/v1/admin/old',
      status: 200,
      duration_ms: 1,
      request_id: id,
      remote_addr: '127.0.0.1',
      user_agent: '',
    });
    await store.insertAudit(old('old-40', 40));
    await store.insertAudit(old('old-20', 20));
    expect(await pruneAudit(store, clock, 0)).toBe(0);
    expect(await pruneAudit(store, clock, 30 * 86_400_000)).toBe(1);
    expect((await audit('?path=/api/v1/admin/old')).map((r) => r.id)).toEqual(['old-20']);

    const timer = startAuditPruner(store, clock, 10 * 86_400_000);
    expect(timer).not.toBeNull();
    clearInterval(timer!);
    // Its first pass runs at once.
    await waitFor('the pruner’s first pass', async () => (await audit('?path=/api/v1/admin/old')).length === 0);
    expect(await audit('?path=/api/v1/admin/old')).toEqual([]);
    expect(startAuditPruner(store, clock, 0)).toBeNull();
  });
});

describe('audit retention at startup', () => {
  it('a control plane started with auth.admin_audit_retention prunes old records from its store', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-audit-retention-'));
    const database = { driver: 'sqlite', path: join(dir, 'sbx.db') };
    const record = (id: string, daysAgo: number): AuditRecord => ({
      id,
      created_at: new Date(Date.now() - daysAgo * 86_400_000).toISOString(),
      actor: 'admin-key',
      method: 'GET',
      path: '/api/v1/admin/kept-or-not',
      status: 200,
      duration_ms: 1,
      request_id: id,
      remote_addr: '127.0.0.1',
      user_agent: '',
    });
    const first = await startTestServer({ database });
    await first.plane.deps.store.insertAudit(record('old-10d', 10));
    await first.plane.deps.store.insertAudit(record('new-1d', 1));
    await first.close();

    const second = await startTestServer({ database, auth: { admin_audit_retention: '120h' } });
    try {
      const ids = async () => (await second.plane.deps.store.listAudit({ path: '/api/v1/admin/kept-or-not' })).map((r) => r.id);
      for (let i = 0; i < 50 && (await ids()).includes('old-10d'); i++) await new Promise((r) => setTimeout(r, 20));
      expect(await ids()).toEqual(['new-1d']);
    } finally {
      await second.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
