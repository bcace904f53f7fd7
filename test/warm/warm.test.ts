/**
 * Warm pools (DESIGN.md §11) over the real API and store: spawns of a warmed shape claim a ready
 * runtime (each exactly once), the pool refills, fills only free capacity and gives room back, and
 * a restart adopts what was left (nothing leaks).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { RestartablePlane } from '../processes/helpers.js';

type Stats = { shape: { provider: string; memory_mb: number }; ready: number; target: number; hits: number; misses: number };

const planes: RestartablePlane[] = [];
afterEach(async () => {
  for (const p of planes.splice(0)) await p.remove();
});

function plane(defaults: Record<string, unknown>): RestartablePlane {
  const p = new RestartablePlane((dir) => ({
    providers: { default: 'mock', mock: { root_dir: `${dir}/mock` } },
    defaults: { memory_mb: 64, ...defaults },
  }));
  planes.push(p);
  return p;
}

async function warmStats(url: string): Promise<Stats[]> {
  return (await call(url, 'GET', '/api/v1/diagnostics')).body.warm as Stats[];
}

async function until<T>(what: string, probe: () => Promise<T>, ok: (v: T) => boolean, ms = 20_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await probe();
    if (ok(v)) return v;
    if (Date.now() > end) throw new Error(`${what}: still ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('warm pools', () => {
  it('a spawn of the warmed shape claims a ready runtime; the pool refills; the sandbox works', async () => {
    const p = plane({ warm: 2 });
    const url = await p.start();
    await until(
      'pool filled',
      () => warmStats(url),
      (s) => s[0]?.ready === 2,
    );
    const ready = new Set((await p.plane!.deps.store.listWarm()).map((w) => w.sandbox_id));
    expect(ready.size).toBe(2);
    const sb = await call(url, 'POST', '/api/v1/sandboxes', {});
    expect(sb.status).toBe(201);
    expect(ready.has(sb.body.id)).toBe(true);
    const ex = await call(url, 'POST', `/api/v1/sandboxes/${sb.body.id}/exec`, { command: 'echo warm' });
    expect(ex.body.stdout).toBe('warm\n');
    // Another shape does not claim one.
    const other = await call(url, 'POST', '/api/v1/sandboxes', { memory_mb: 128 });
    expect(ready.has(other.body.id)).toBe(false);
    const s = await until(
      'pool refilled',
      () => warmStats(url),
      (x) => x[0]?.ready === 2,
    );
    expect(s).toEqual([
      {
        shape: { provider: 'mock', image: expect.any(String), memory_mb: 64, vcpus: 1, network: null },
        ready: 2,
        target: 2,
        hits: 1,
        misses: 0,
      },
    ]);
    const metrics = await (await fetch(`${url}/api/v1/metrics/prometheus`)).text();
    expect(metrics).toMatch(/sbx_warm_hits_total\{provider="mock",image="[^"]+"\} 1/);
    expect(metrics).toMatch(/sbx_warm_ready\{provider="mock",image="[^"]+"\} 2/);
  }, 60_000);

  it('50 concurrent spawns for 10 warm runtimes hand each to exactly one sandbox', async () => {
    const p = plane({ warm: 10 });
    const url = await p.start();
    await until(
      'pool filled',
      () => warmStats(url),
      (s) => s[0]?.ready === 10,
      60_000,
    );
    const warmIds = new Set((await p.plane!.deps.store.listWarm()).map((w) => w.sandbox_id));
    const runtimes = new Map((await p.plane!.deps.store.listWarm()).map((w) => [w.sandbox_id, w.runtime_id]));
    const spawns = await Promise.all(Array.from({ length: 50 }, () => call(url, 'POST', '/api/v1/sandboxes', {})));
    expect(spawns.map((r) => r.status)).toEqual(Array(50).fill(201));
    const ids = spawns.map((r) => r.body.id as string);
    expect(new Set(ids).size).toBe(50);
    const claimed = ids.filter((id) => warmIds.has(id));
    expect(claimed.length).toBeGreaterThanOrEqual(1);
    // Each claimed sandbox runs on the runtime made for it, and no runtime serves two sandboxes.
    const store = p.plane!.deps.store;
    const recs = await Promise.all(ids.map((id) => store.getSandbox(id)));
    const used = recs.map((r) => r!.runtime_id);
    expect(new Set(used).size).toBe(50);
    for (const id of claimed) expect((await store.getSandbox(id))!.runtime_id).toBe(runtimes.get(id));
    const s = (await warmStats(url))[0]!;
    // Runtimes started by the refill during the burst may be claimed too.
    expect(s.hits).toBeGreaterThanOrEqual(claimed.length);
    expect(s.hits + s.misses).toBe(50);
  }, 120_000);

  it('a template warms its own shape; the pool fills only free capacity and gives room back', async () => {
    const p = plane({ max_sandboxes: 3 });
    const url = await p.start();
    expect((await call(url, 'POST', '/api/v1/templates', { name: 'fast', memory_mb: 96, warm: 2 })).body.warm).toBe(2);
    expect((await call(url, 'POST', '/api/v1/templates', { name: 'bad', warm: 65 })).status).toBe(400);
    await until(
      'template shape filled',
      () => warmStats(url),
      (s) => s.find((x) => x.shape.memory_mb === 96)?.ready === 2,
    );
    const t = await call(url, 'POST', '/api/v1/templates/fast/spawn', {});
    expect(t.status).toBe(201);
    expect((await call(url, 'GET', `/api/v1/sandboxes/${t.body.id}`)).body.memory_mb).toBe(96);
    // 1 live + warm ≤ 3: the pool refills to 2 only.
    await until(
      'refilled within capacity',
      () => warmStats(url),
      (s) => s[0]?.ready === 2,
    );
    // Two spawns of another shape need the room: warm runtimes give it back, nothing is refused.
    for (let i = 0; i < 2; i++) expect((await call(url, 'POST', '/api/v1/sandboxes', {})).status).toBe(201);
    const s = await until(
      'room given back',
      () => warmStats(url),
      (x) => x[0]?.ready === 0,
    );
    expect(s[0]!.target).toBe(2);
    const live = await p.plane!.deps.store.countLive(new Date().toISOString(), []);
    expect(live.total).toBe(3);
    // Lowering the target gives runtimes back.
    await call(url, 'DELETE', `/api/v1/sandboxes/${t.body.id}`);
    await until(
      'refilled after a destroy',
      () => warmStats(url),
      (x) => x[0]?.ready === 1,
    );
    expect((await call(url, 'PUT', '/api/v1/templates/fast', { memory_mb: 96 })).status).toBe(200);
    await until(
      'target dropped',
      () => p.plane!.deps.store.listWarm(),
      (w) => w.length === 0,
    );
  }, 90_000);

  it('a restart adopts warm runtimes left behind, drops vanished ones, and leaks none', async () => {
    const p = plane({ warm: 3 });
    let url = await p.start();
    await until(
      'pool filled',
      () => warmStats(url),
      (s) => s[0]?.ready === 3,
    );
    const before = await p.plane!.deps.store.listWarm();
    const mock = p.plane!.deps.providers.get('mock');
    await p.stop();
    // While it is down, one runtime vanishes.
    await mock.destroy(before[0]!.runtime_id);
    url = await p.start();
    const provider = p.plane!.deps.providers.get('mock');
    await until(
      'pool refilled',
      () => warmStats(url),
      (s) => s[0]?.ready === 3,
    );
    const after = await p.plane!.deps.store.listWarm();
    const kept = after.filter((w) => before.some((b) => b.sandbox_id === w.sandbox_id));
    expect(kept.map((w) => w.sandbox_id).sort()).toEqual(
      before
        .slice(1)
        .map((w) => w.sandbox_id)
        .sort(),
    );
    const runtimes = (await provider.listRuntimes!()).map((r) => r.runtime_id).sort();
    expect(runtimes).toEqual(after.map((w) => w.runtime_id).sort());
  }, 60_000);

  it('warm_destroy_on_shutdown leaves no runtime behind', async () => {
    const p = plane({ warm: 2, warm_destroy_on_shutdown: true });
    const url = await p.start();
    await until(
      'pool filled',
      () => warmStats(url),
      (s) => s[0]?.ready === 2,
    );
    const provider = p.plane!.deps.providers.get('mock');
    await p.stop();
    expect(await provider.listRuntimes!()).toEqual([]);
  }, 60_000);
});
