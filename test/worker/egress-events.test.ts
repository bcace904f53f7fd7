/**
 * The control plane's side of egress on workers (DESIGN.md §10), over real HTTP with real workers
 * (mock provider, which enforces nothing): placement only on workers that advertise enforcement,
 * `POST /api/v1/worker/events` accepting denials only for the worker's own sandboxes, and the
 * verdict counts of heartbeats in the metrics. The enforcing side runs in
 * test/docker/egress-worker.test.ts.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'egress-events-token';
const as = (id: string) => ({ 'x-worker-id': id, 'x-worker-token': TOKEN });

describe('egress on workers: placement, reported denials, counted verdicts', () => {
  let cp: TestServer;
  let w1: Worker;
  let dir: string;
  let sandbox: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-egress-events-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
    w1 = await startTestWorker(dir, { id: 'w1', controlPlane: cp.url, auth: { worker_token: TOKEN } });
    const res = await call(cp.url, 'POST', '/api/v1/sandboxes', {});
    expect(res.status, res.text).toBe(201);
    sandbox = res.body.id;
  }, 60_000);
  afterAll(async () => {
    await w1?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('a filtered spawn with no worker that enforces egress → 501 naming why, nothing created', async () => {
    const before = (await call(cp.url, 'GET', '/api/v1/sandboxes')).body.length;
    const res = await call(cp.url, 'POST', '/api/v1/sandboxes', { network: 'filtered', egress: { allow: ['pypi.org'] } });
    expect(res.status).toBe(501);
    expect(res.body).toEqual({
      code: 'not_implemented',
      message: 'network "filtered" is not available: no worker running provider mock enforces egress rules',
    });
    expect((await call(cp.url, 'GET', '/api/v1/sandboxes')).body.length).toBe(before);
  });

  it('a worker that advertises enforcement is chosen for a filtered spawn (its spawn then checks on its side)', async () => {
    // w2 claims egress:mock in its heartbeat; its RPC is not there, so the placement is what shows.
    const hb = await call(
      cp.url,
      'POST',
      '/api/v1/worker/w2/heartbeat',
      { hostname: 'h2', providers: ['mock'], capabilities: ['spawn', 'egress:mock'], capacity: { rpc_url: 'http://127.0.0.1:9' } },
      as('w2'),
    );
    expect(hb.status, hb.text).toBe(200);
    const res = await call(cp.url, 'POST', '/api/v1/sandboxes', { network: 'filtered' });
    // Placed on w2 (not w1, which cannot enforce): its RPC does not answer, and that is the answer.
    expect(res.text).toContain('w2');
    expect(res.status).toBe(503);
    await call(cp.url, 'DELETE', '/api/v1/admin/workers/w2');
  });

  it('a filtered template on a provider only workers run is accepted', async () => {
    const res = await call(cp.url, 'POST', '/api/v1/templates', { name: 'filtered-remote', egress: { allow: ['pypi.org:443'] } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.network).toBe('filtered');
  });

  it("POST /api/v1/worker/events publishes denials about the worker's own sandboxes and drops the rest", async () => {
    const events = [
      { type: 'network.denied', sandbox_id: sandbox, host: 'evil.test', port: 443, reason: 'no_rule' },
      { type: 'network.denied', sandbox_id: 'sb-not-there', host: 'x.test', port: 80, reason: 'deny_rule' },
    ];
    const mine = await call(cp.url, 'POST', '/api/v1/worker/events', { events }, as('w1'));
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body).toEqual({ accepted: 1, rejected: 1 });
    const seen = cp.plane.deps.bus.recent().filter((e) => e.type === 'network.denied');
    expect(seen.map((e) => [e.sandbox_id, e.worker_id, e.data])).toEqual([
      [sandbox, 'w1', { sandbox_id: sandbox, host: 'evil.test', port: 443, reason: 'no_rule' }],
    ]);
    // Another worker cannot speak for w1's sandbox.
    const other = await call(cp.url, 'POST', '/api/v1/worker/events', { events: events.slice(0, 1) }, as('w9'));
    expect(other.body).toEqual({ accepted: 0, rejected: 1 });
    expect(cp.plane.deps.bus.recent().filter((e) => e.type === 'network.denied')).toHaveLength(1);
  });

  it('bad event batches are 400; no worker credentials 401; user keys are not worker credentials', async () => {
    const bad = async (body: unknown) => {
      const r = await call(cp.url, 'POST', '/api/v1/worker/events', body, as('w1'));
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.body.code).toBe('bad_request');
    };
    await bad({});
    await bad({ events: [{ type: 'network.denied', sandbox_id: sandbox, host: 'a', port: 80, reason: 'because' }] });
    await bad({ events: [{ type: 'sandbox.destroyed', sandbox_id: sandbox }] });
    await bad({ events: [{ type: 'network.denied', sandbox_id: sandbox, host: 'a', port: 70000, reason: 'no_rule' }] });
    await bad({
      events: Array.from({ length: 501 }, () => ({ type: 'network.denied', sandbox_id: sandbox, host: 'a', port: 1, reason: 'limit' })),
    });
    expect((await call(cp.url, 'POST', '/api/v1/worker/events', { events: [] })).status).toBe(401);
    expect(
      (await call(cp.url, 'POST', '/api/v1/worker/events', { events: [] }, { 'x-worker-id': 'w1', 'x-worker-token': 'wrong' })).status,
    ).toBe(401);
  });

  it('verdict counts in heartbeats reach sbx_egress_connections_total; a worker that started over counts from zero', async () => {
    const metric = async (verdict: string) => {
      const text = (await call(cp.url, 'GET', '/api/v1/metrics/prometheus')).text;
      return Number(new RegExp(`sbx_egress_connections_total\\{verdict="${verdict}"\\} (\\d+)`).exec(text)?.[1] ?? 0);
    };
    const beat = (egress: { allowed: number; denied: number }) =>
      call(cp.url, 'POST', '/api/v1/worker/w3/heartbeat', { hostname: 'h3', providers: [], egress }, as('w3'));
    const base = { allowed: await metric('allowed'), denied: await metric('denied') };
    expect((await beat({ allowed: 5, denied: 2 })).status).toBe(200);
    expect((await beat({ allowed: 8, denied: 2 })).body.egress).toEqual({ allowed: 8, denied: 2 });
    expect(await metric('allowed')).toBe(base.allowed + 8);
    expect(await metric('denied')).toBe(base.denied + 2);
    // Counts that went down: the worker's gateway started over (its state was lost).
    await beat({ allowed: 1, denied: 1 });
    expect(await metric('allowed')).toBe(base.allowed + 9);
    expect(await metric('denied')).toBe(base.denied + 3);
    expect(
      (await call(cp.url, 'POST', '/api/v1/worker/w3/heartbeat', { hostname: 'h3', egress: { allowed: -1, denied: 0 } }, as('w3'))).status,
    ).toBe(400);
    await call(cp.url, 'DELETE', '/api/v1/admin/workers/w3');
  });
});
