/**
 * `worker.status_batch` through a real worker (createWorker: SQLite state, mock provider, fastify
 * RPC server on a real port) and a real control plane (`server.local_worker: false`, reconciliation
 * every second): the method's answers and refusals on /rpc, the control plane's client paging it,
 * an older worker's 501 making the client fall back, and a runtime lost behind the control plane's
 * back found by a reconciliation pass.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { AUD_RPC } from '../../src/core/auth/worker-claims.js';
import type { WorkerRecord } from '../../src/core/ports/index.js';
import { mintWorkerToken } from '../../src/transports/shared/worker-auth.js';
import { createRemoteWorkers } from '../../src/transports/worker-rpc/client/remote-provider.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'status-batch-token-0123456789abcdef';
const KEY = 'signing-key-0123456789abcdef0123456789';
const creds = { shared_token: TOKEN, tokens: {}, signing_keys: [], revoked_token_ids: [] };

let cp: TestServer;
let worker: Worker;
let dir: string;
let rpc: string;
const hdr = (token = TOKEN) => ({ 'x-worker-id': 'wb', 'x-worker-token': token });
const batch = (sandboxes: unknown[], token?: string) =>
  call(rpc, 'POST', '/rpc', { id: 'b1', method: 'worker.status_batch', worker_id: 'wb', params: { sandboxes } }, hdr(token));

function workerAt(url: string, id = 'wb'): WorkerRecord {
  const at = new Date().toISOString();
  return {
    id,
    hostname: id,
    status: 'online',
    providers: ['mock'],
    capabilities: [],
    capacity: { max_sandboxes: 0, max_sandboxes_per_owner: 0, rpc_url: url },
    last_heartbeat: at,
    created_at: at,
    updated_at: at,
  };
}

/** Spawns through the control plane; the target as the control plane stored it. */
async function spawned(): Promise<{ sandbox_id: string; provider: string; runtime_id: string }> {
  const sb = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
  expect(sb.status).toBe(201);
  const rec = await cp.plane.deps.sandboxes.get(sb.body.id, { owner_id: null, admin: true });
  return { sandbox_id: rec.id, provider: 'mock', runtime_id: rec.runtime_id! };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-status-batch-'));
  cp = await startTestServer({
    server: { local_worker: false, reconcile_interval: '1s' },
    auth: { worker_token: TOKEN, worker_signing_key: KEY },
  });
  worker = await startTestWorker(dir, { id: 'wb', controlPlane: cp.url, auth: { worker_token: TOKEN, worker_signing_key: KEY } });
  rpc = worker.rpcUrl!;
});

afterAll(async () => {
  await worker?.stop();
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('worker.status_batch on a real worker', () => {
  it('answers each runtime in the order asked; refuses an empty or oversized list, and a token without worker:status', async () => {
    const a = await spawned();
    const b = await spawned();
    const r = await batch([a, { ...b, runtime_id: 'not-its-runtime' }, { sandbox_id: 'sb-none', provider: 'mock', runtime_id: 'x' }]);
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      id: 'b1',
      worker_id: 'wb',
      result: {
        statuses: [
          { sandbox_id: a.sandbox_id, state: 'running' },
          { sandbox_id: b.sandbox_id, state: 'destroyed' },
          { sandbox_id: 'sb-none', state: 'destroyed' },
        ],
      },
    });
    expect((await batch([])).status).toBe(400);
    const tooMany = Array.from({ length: 1001 }, (_, i) => ({ sandbox_id: `sb-${i}`, provider: 'mock', runtime_id: 'x' }));
    const over = await batch(tooMany);
    expect(over.status).toBe(400);
    expect(over.body.error.code).toBe('bad_request');
    const execOnly = mintWorkerToken(KEY, { worker_id: 'wb', aud: AUD_RPC, scopes: ['worker:exec'] });
    expect((await batch([a], execOnly)).status).toBe(403);
    const statusOnly = mintWorkerToken(KEY, { worker_id: 'wb', aud: AUD_RPC, scopes: ['worker:status'] });
    expect((await batch([a], statusOnly)).status).toBe(200);
  });

  it("the control plane's client pages 2,500 runtimes (one call may name 1,000) and maps the states", async () => {
    const a = await spawned();
    const remote = createRemoteWorkers({ credentials: creds });
    const targets = [
      a,
      ...Array.from({ length: 2499 }, (_, i) => ({ sandbox_id: `sb-absent-${i}`, provider: 'mock', runtime_id: `rt-${i}` })),
    ];
    const got = await remote.statusBatch!(workerAt(rpc), targets);
    expect(got!.size).toBe(2500);
    expect(got!.get(a.sandbox_id)).toBe('running');
    expect(got!.get('sb-absent-2498')).toBe('missing');
    await remote.close?.();
  });
});

describe('an older worker without status_batch', () => {
  let old: Server;
  let url: string;
  const methods: string[] = [];
  beforeAll(async () => {
    // Answers as a worker from before the method: 501 for it, worker.status for the rest.
    old = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const env = JSON.parse(body) as { id: string; method: string; params: { sandbox_id: string } };
        methods.push(env.method);
        if (env.method !== 'worker.status')
          return res.writeHead(501).end(
            JSON.stringify({
              id: env.id,
              worker_id: 'wold',
              error: { code: 'not_implemented', message: `unknown RPC method "${env.method}"` },
            }),
          );
        res.end(
          JSON.stringify({
            id: env.id,
            worker_id: 'wold',
            result: { sandbox_id: env.params.sandbox_id, state: 'running', provider: 'mock', worker_id: 'wold' },
          }),
        );
      });
    });
    await new Promise<void>((r) => old.listen(0, '127.0.0.1', r));
    url = `http://127.0.0.1:${(old.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => old.close(() => r())));

  it('the batch answers null (ask one at a time), and the per-sandbox call still works', async () => {
    const remote = createRemoteWorkers({ credentials: creds });
    const w = workerAt(url, 'wold');
    const t = { sandbox_id: 'sb-1', provider: 'mock', runtime_id: 'rt-1' };
    expect(await remote.statusBatch!(w, [t])).toBeNull();
    expect(await remote.provider(w, { ...t, lease: async () => null }).status('rt-1')).toBe('running');
    expect(methods).toEqual(['worker.status_batch', 'worker.status']);
    await remote.close?.();
  });
});

describe('reconciliation through the real worker', () => {
  it('a runtime destroyed behind the control plane is found by a pass and its sandbox destroyed (runtime_lost)', async () => {
    const keep = await spawned();
    const lost = await spawned();
    const lease = (await cp.plane.deps.leases.list()).find((l) => l.resource_id === lost.sandbox_id)!;
    const d = await call(rpc, 'POST', '/rpc', { id: 'd1', method: 'worker.destroy', worker_id: 'wb', lease, params: lost }, hdr());
    expect(d.status).toBe(200);
    // The list reads the store only (no status call): what it shows is what a pass wrote.
    const stateOf = async (id: string) =>
      ((await call(cp.url, 'GET', '/api/v1/sandboxes')).body as Array<{ id: string; state: string }>).find((s) => s.id === id)?.state;
    const deadline = Date.now() + 15_000;
    while ((await stateOf(lost.sandbox_id)) !== undefined && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect(await stateOf(lost.sandbox_id)).toBeUndefined();
    const rec = await cp.plane.deps.sandboxes.get(lost.sandbox_id, { owner_id: null, admin: true }).catch(() => null);
    expect(rec?.state ?? 'destroyed').toBe('destroyed');
    expect(await stateOf(keep.sandbox_id)).toBe('running');
  });
});
