/**
 * Secrets on workers (DESIGN.md §15) over real HTTP with a real `sbx worker` (mock provider): the
 * worker-facing fetch answers only the worker a sandbox is placed on (and whose lease it holds),
 * only over TLS or loopback; the worker's own SecretSource fetches through it, caches ≤ 1 s, fails
 * closed, and answers nothing for sandboxes it does not run. The mock provider cannot enforce
 * `filtered`, so the binding is stored as a filtered spawn stores it (the docker suite spawns one).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { workerSecretSource } from '../../src/compose/worker-secrets.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'worker-secrets-token-8c1e3a5f';
const as = (id: string) => ({ 'x-worker-id': id, 'x-worker-token': TOKEN });
const VALUE = 'worker-secret-value-5d7f9b1c';
const PLACEHOLDER = `sbx_secret_${'ab'.repeat(16)}`;

describe('secrets fetched by workers', () => {
  let cp: TestServer;
  let w1: Worker;
  let dir: string;
  let sandbox: string;
  const url = (id: string) => `/api/v1/worker/sandboxes/${id}/secrets`;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-worker-secrets-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
    w1 = await startTestWorker(dir, { id: 'w1', controlPlane: cp.url, auth: { worker_token: TOKEN } });
    const made = await call(
      cp.url,
      'POST',
      '/api/v1/secrets',
      { name: 'API_TOKEN', value: VALUE, hosts: ['api.example.com'] },
      {
        'x-user-id': 'alice',
      },
    );
    expect(made.status, made.text).toBe(201);
    const res = await call(cp.url, 'POST', '/api/v1/sandboxes', {}, { 'x-user-id': 'alice' });
    expect(res.status, res.text).toBe(201);
    expect(res.body.worker_id).toBe('w1');
    sandbox = res.body.id;
    await cp.plane.deps.store.insertSecretBindings([
      { sandbox_id: sandbox, owner_key: 'alice', name: 'API_TOKEN', placeholder: PLACEHOLDER },
    ]);
    // Another worker, registered but running nothing.
    const hb = await call(
      cp.url,
      'POST',
      '/api/v1/worker/w2/heartbeat',
      { hostname: 'h2', providers: ['mock'], capabilities: ['spawn'] },
      as('w2'),
    );
    expect(hb.status, hb.text).toBe(200);
  }, 60_000);
  afterAll(async () => {
    await w1?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('answers the worker the sandbox is placed on, with the value, uncached', async () => {
    const res = await call(cp.url, 'GET', url(sandbox), undefined, as('w1'));
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.body).toEqual({
      secrets: [{ name: 'API_TOKEN', placeholder: PLACEHOLDER, value: VALUE, hosts: ['api.example.com'], allow_plain_http: false }],
    });
  });

  it('refuses every other worker, unknown sandboxes and other credentials', async () => {
    const other = await call(cp.url, 'GET', url(sandbox), undefined, as('w2'));
    expect(other.status).toBe(403);
    expect(other.body.code).toBe('forbidden');
    expect(other.text).not.toContain(VALUE);
    const unknown = await call(cp.url, 'GET', url('sb-does-not-exist'), undefined, as('w1'));
    expect(unknown.status).toBe(403);
    expect((await call(cp.url, 'GET', url(sandbox), undefined, { 'x-worker-id': 'w1', 'x-worker-token': 'wrong' })).status).toBe(401);
    expect((await call(cp.url, 'GET', url(sandbox), undefined, { 'x-user-id': 'alice' })).status).toBe(401);
  });

  it('refuses a plain-HTTP fetch from a peer that is not loopback', async () => {
    const res = await cp.plane.app.inject({ method: 'GET', url: url(sandbox), headers: as('w1'), remoteAddress: '10.1.2.3' });
    expect(res.statusCode).toBe(403);
    expect(JSON.parse(res.body).message).toMatch(/only over TLS/);
    expect(res.body).not.toContain(VALUE);
  });

  it("the worker's SecretSource fetches for its own sandbox, follows a rotation within a second, and nothing for others", async () => {
    const first = await w1.secrets.forSandbox(sandbox);
    expect(first.map((b) => [b.name, b.placeholder, b.value, b.hosts.map((h) => h.text)])).toEqual([
      ['API_TOKEN', PLACEHOLDER, VALUE, ['api.example.com']],
    ]);
    expect(await w1.secrets.forSandbox('sb-not-mine')).toEqual([]);
    const put = await call(cp.url, 'PUT', '/api/v1/secrets/API_TOKEN', { value: `${VALUE}-rotated` }, { 'x-user-id': 'alice' });
    expect(put.status).toBe(200);
    const deadline = Date.now() + 3_000;
    let value = first[0]!.value;
    while (value === VALUE && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      value = (await w1.secrets.forSandbox(sandbox))[0]!.value;
    }
    expect(value).toBe(`${VALUE}-rotated`);
  });

  it('injections counted by workers reach sbx_egress_secret_injections_total through heartbeats (a restart counts from zero)', async () => {
    const metric = async () => {
      const text = (await call(cp.url, 'GET', '/api/v1/metrics/prometheus')).text;
      const m = /^sbx_egress_secret_injections_total (\d+)$/m.exec(text);
      expect(m, 'the counter is exported').not.toBeNull();
      return Number(m![1]);
    };
    const beat = (egress: Record<string, number>) =>
      call(cp.url, 'POST', '/api/v1/worker/w4/heartbeat', { hostname: 'h4', providers: [], egress }, as('w4'));
    const base = await metric();
    expect((await beat({ allowed: 3, denied: 0, injections: 2 })).status).toBe(200);
    const saved = await beat({ allowed: 5, denied: 1, injections: 6 });
    expect(saved.body.egress).toEqual({ allowed: 5, denied: 1, injections: 6 });
    expect(await metric()).toBe(base + 6);
    // The same counts again add nothing; an older worker's heartbeat (no injections) neither.
    await beat({ allowed: 5, denied: 1, injections: 6 });
    await beat({ allowed: 6, denied: 1 });
    expect(await metric()).toBe(base + 6);
    // Counts that went down: the worker's gateway started over.
    await beat({ allowed: 1, denied: 0, injections: 1 });
    expect(await metric()).toBe(base + 7);
    expect((await beat({ allowed: 1, denied: 0, injections: -1 })).status).toBe(400);
    await call(cp.url, 'DELETE', '/api/v1/admin/workers/w4');
  });

  it('fails closed: a failing fetch throws, and plain http to another host is never used', async () => {
    const failing = workerSecretSource({
      controlPlanes: ['https://cp.example'],
      runs: () => true,
      fetch: () => Promise.reject(new Error('control plane unreachable')),
    });
    await expect(failing.forSandbox(sandbox)).rejects.toThrow(/unreachable/);
    let fetched = 0;
    const plain = workerSecretSource({
      controlPlanes: ['http://10.0.0.7:7423'],
      runs: () => true,
      fetch: async () => {
        fetched++;
        return { secrets: [] };
      },
    });
    await expect(plain.forSandbox(sandbox)).rejects.toThrow(/only over TLS/);
    expect(fetched).toBe(0);
  });
});
