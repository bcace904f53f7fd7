import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const API_KEY = 'owner-user-key-5a7c9e1b3d5f7a9c1e3b5d7f';
const ADMIN_KEY = 'owner-admin-key-2b4d6f8a0c2e4b6d8f0a2c4e';
const as = (user?: string) => ({ 'x-api-key': API_KEY, ...(user ? { 'x-user-id': user } : {}) });
const admin = { 'x-admin-api-key': ADMIN_KEY };

async function spawn(base: string, user?: string): Promise<string> {
  const res = await call(base, 'POST', '/api/v1/sandboxes', {}, as(user));
  expect(res.status).toBe(201);
  return res.body.id as string;
}

describe('ownership enforced (auth.enforce_ownership)', () => {
  let srv: TestServer;
  let alice: string;
  let bob: string;
  let shared: string;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: API_KEY, admin_api_key: ADMIN_KEY, enforce_ownership: true } });
    alice = await spawn(srv.url, 'alice');
    bob = await spawn(srv.url, 'bob');
    shared = await spawn(srv.url);
  });
  afterAll(async () => srv?.close());

  it('lists only the caller’s and unowned sandboxes; admin sees all', async () => {
    const ids = async (h: Record<string, string>) =>
      ((await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, h)).body as Array<{ id: string }>).map((s) => s.id).sort();
    expect(await ids(as('alice'))).toEqual([alice, shared].sort());
    expect(await ids(as('bob'))).toEqual([bob, shared].sort());
    expect(await ids(as())).toEqual([shared]);
    expect(await ids(admin)).toEqual([alice, bob, shared].sort());
  });

  it('another owner gets 404 on get, exec, files, logs, extend and destroy', async () => {
    const tries: Array<[string, string, unknown?]> = [
      ['GET', `/api/v1/sandboxes/${alice}`],
      ['POST', `/api/v1/sandboxes/${alice}/exec`, { command: 'echo hi' }],
      ['POST', `/api/v1/sandboxes/${alice}/files`, { path: '/tmp/x', content: 'x' }],
      ['GET', `/api/v1/sandboxes/${alice}/files?path=/tmp/x`],
      ['GET', `/api/v1/sandboxes/${alice}/files/list?path=/`],
      ['GET', `/api/v1/sandboxes/${alice}/logs`],
      ['POST', `/api/v1/sandboxes/${alice}/extend`, { ttl: '1h' }],
      ['DELETE', `/api/v1/sandboxes/${alice}`],
    ];
    for (const [method, path, body] of tries) {
      const res = await call(srv.url, method, path, body, as('bob'));
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(res.body.code).toBe('not_found');
      expect(res.body.message).not.toContain('bob');
    }
    // Still alive and untouched for its owner.
    const own = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice}`, undefined, as('alice'));
    expect(own.status).toBe(200);
    expect(own.body.owner_id).toBe('alice');
  });

  it('the owner and an admin can use it', async () => {
    const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${alice}/exec`, { command: 'echo hi' }, as('alice'));
    expect(exec.status).toBe(200);
    expect(exec.body.stdout).toBe('hi\n');
    const viaAdmin = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice}`, undefined, { ...admin, 'x-user-id': 'bob' });
    expect(viaAdmin.status).toBe(200);
    const del = await call(srv.url, 'DELETE', `/api/v1/sandboxes/${bob}`, undefined, admin);
    expect(del.body).toEqual({ status: 'destroyed' });
  });

  it('unowned sandboxes stay usable by everyone', async () => {
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${shared}`, undefined, as('bob'))).status).toBe(200);
  });
});

describe('ownership not enforced', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({ auth: { enabled: true, api_key: API_KEY } });
  });
  afterAll(async () => srv?.close());

  it('X-User-ID is attribution only', async () => {
    const alice = await spawn(srv.url, 'alice');
    const got = await call(srv.url, 'GET', `/api/v1/sandboxes/${alice}`, undefined, as('bob'));
    expect(got.status).toBe(200);
    expect(got.body.owner_id).toBe('alice');
    const list = await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, as('bob'));
    expect((list.body as Array<{ id: string }>).map((s) => s.id)).toContain(alice);
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${alice}`, undefined, as('bob'))).body).toEqual({ status: 'destroyed' });
  });
});
