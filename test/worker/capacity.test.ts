/**
 * A worker's capacity (DESIGN.md §7): a real `sbx worker` with `max_sandboxes: 3` behind a real
 * control plane. Ten concurrent spawns through the API place exactly three on it (placement holds a
 * slot per spawn until it is stored or fails), the rest 503; ten concurrent `worker.spawn` calls
 * straight at its RPC make exactly three runtimes (the worker counts its runtimes plus the spawns in
 * flight), the rest 503 — and a full worker refuses whatever a control plane placed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

const TOKEN = 'capacity-worker-token-0123456789abcdef';
const ID = 'wcap';
const hdr = { 'x-worker-id': ID, 'x-worker-token': TOKEN };

let cp: TestServer;
let worker: Worker;
let dir: string;

const rpcCall = (method: string, params: Record<string, unknown>, lease?: Record<string, unknown>) =>
  call(worker.rpcUrl!, 'POST', '/rpc', { id: 'c', method, worker_id: ID, params, ...(lease ? { lease } : {}) }, hdr);

const leaseFor = (id: string) => ({
  resource_id: id,
  holder_id: ID,
  generation: 1,
  expires_at: new Date(Date.now() + 600_000).toISOString(),
});

function spawnParams(id: string) {
  return { sandbox_id: id, provider: 'mock', image: 'i', memory_mb: 1, vcpus: 1, ttl: '10m', metadata: {}, owner_id: null };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-capacity-'));
  cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: TOKEN } });
  worker = await startTestWorker(dir, { id: ID, controlPlane: cp.url, auth: { worker_token: TOKEN }, defaults: { max_sandboxes: 3 } });
});

afterAll(async () => {
  await worker?.stop();
  await cp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('worker capacity', () => {
  it('the heartbeat advertises max_sandboxes 3', async () => {
    const w = await call(cp.url, 'GET', `/api/v1/workers/${ID}`);
    expect(w.body.capacity).toMatchObject({ max_sandboxes: 3 });
  });

  it('10 concurrent spawns through the control plane: exactly 3 placed, 7 × 503; a full worker refuses a direct spawn too', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, () => call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' })));
    const made = answers.filter((a) => a.status === 201);
    const refused = answers.filter((a) => a.status !== 201);
    expect(made).toHaveLength(3);
    expect(refused.map((a) => [a.status, a.body.code])).toEqual(Array(7).fill([503, 'unavailable']));
    // Placement refused them (it counted the 3 in flight): the worker never had to, so no spawn failed there.
    expect(refused[0]!.body.message).toBe('no eligible worker for provider mock');
    expect(cp.plane.deps.bus.recent({ types: ['provider.failed'] })).toEqual([]);
    for (const a of made) expect((await cp.plane.deps.sandboxes.get(a.body.id, { owner_id: null, admin: true })).worker_id).toBe(ID);
    const direct = await rpcCall('worker.spawn', spawnParams('sb-over'), leaseFor('sb-over'));
    expect(direct.status).toBe(503);
    expect(direct.body.error).toEqual({ code: 'unavailable', message: `worker ${ID} is full: it runs its maximum of 3 sandboxes` });
    for (const a of made) expect((await call(cp.url, 'DELETE', `/api/v1/sandboxes/${a.body.id}`)).status).toBe(200);
    // Room again once they are gone: placement's slots were handed over to the rows, and the rows are gone.
    const again = await call(cp.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    expect(again.status).toBe(201);
    expect((await call(cp.url, 'DELETE', `/api/v1/sandboxes/${again.body.id}`)).status).toBe(200);
  });

  it('10 concurrent worker.spawn calls straight at the RPC: exactly 3 runtimes, 7 × 503', async () => {
    const ids = Array.from({ length: 10 }, (_, i) => `sb-direct-${i}`);
    const answers = await Promise.all(ids.map((id) => rpcCall('worker.spawn', spawnParams(id), leaseFor(id))));
    const ok = ids.filter((_, i) => answers[i]!.status === 200);
    expect(ok).toHaveLength(3);
    expect(answers.filter((a) => a.status !== 200).map((a) => [a.status, a.body.error.code])).toEqual(Array(7).fill([503, 'unavailable']));
    for (const id of ids) {
      const rt = answers[ids.indexOf(id)]!.body.result?.runtime_id ?? 'none';
      const state = (await rpcCall('worker.status', { sandbox_id: id, provider: 'mock', runtime_id: rt })).body.result.state;
      expect({ id, state }).toEqual({ id, state: ok.includes(id) ? 'running' : 'destroyed' });
    }
    // A retried spawn of one it runs is answered, not refused; a destroy frees a slot.
    const first = ok[0]!;
    expect((await rpcCall('worker.spawn', spawnParams(first), leaseFor(first))).status).toBe(200);
    const rt = answers[ids.indexOf(first)]!.body.result.runtime_id;
    expect((await rpcCall('worker.destroy', { sandbox_id: first, provider: 'mock', runtime_id: rt }, leaseFor(first))).status).toBe(200);
    expect((await rpcCall('worker.spawn', spawnParams('sb-after'), leaseFor('sb-after'))).status).toBe(200);
  });
});
