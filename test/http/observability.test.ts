import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import { instrumentProvider } from '../../src/core/observability/instrument.js';
import type { ConsoleLog, ExecEvent, FileInfo, Provider, ProviderHealth, RuntimeStatus, SpawnResult } from '../../src/core/ports/index.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ROOT = join(import.meta.dirname, '..', '..');
const PKG_VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;

/** A real provider whose backend is down: health says so and every operation fails. */
class DownProvider implements Provider {
  readonly capabilities = ['spawn', 'exec', 'files', 'health'] as const;
  constructor(readonly name: string) {}
  config() {
    return { runtime: 'down' };
  }
  async health(): Promise<ProviderHealth> {
    return { healthy: false, latency_ms: 1, error: 'engine unreachable' };
  }
  private fail(): never {
    throw new SbxError('provider_error', `${this.name}: engine unreachable`);
  }
  async spawn(): Promise<SpawnResult> {
    this.fail();
  }
  async destroy(): Promise<void> {}
  async status(): Promise<RuntimeStatus> {
    return 'missing';
  }
  // eslint-disable-next-line require-yield
  async *exec(): AsyncIterable<ExecEvent> {
    this.fail();
  }
  async writeFile(): Promise<void> {
    this.fail();
  }
  async readFile(): Promise<Uint8Array> {
    this.fail();
  }
  async deleteFile(): Promise<void> {
    this.fail();
  }
  async listFiles(): Promise<FileInfo[]> {
    this.fail();
  }
  async moveFile(): Promise<void> {
    this.fail();
  }
  async chmod(): Promise<void> {
    this.fail();
  }
  async stat(): Promise<FileInfo> {
    this.fail();
  }
  async glob(): Promise<string[]> {
    this.fail();
  }
  async logs(): Promise<ConsoleLog> {
    this.fail();
  }
}

const SCHEDULER_KEYS = [
  'spawn_overflow',
  'spawn_queue_depth',
  'max_spawn_queue',
  'spawn_queue_timeout',
  'admission_control',
  'spawn_queued_total',
  'spawn_dequeued_total',
  'spawn_queue_timeouts',
  'spawn_queue_wait_count',
  'spawn_queue_wait_total',
  'spawn_queue_wait_max',
  'spawn_queue_wait_avg',
  'spawn_queue_wait_total_ms',
  'spawn_queue_wait_max_ms',
  'spawn_queue_wait_avg_ms',
  'worker_id',
  'selected_worker_id',
  'eligible_workers',
  'placements',
  'placement_p50_ms',
  'placement_p99_ms',
];
const RATE_KEYS = [
  'enabled',
  'requests_per_minute',
  'burst',
  'key_by',
  'active_buckets',
  'allowed_total',
  'limited_total',
  'evicted_total',
  'bucket_ttl',
  'cleanup_interval',
];
const LIMIT_KEYS = [
  'max_sandboxes',
  'max_sandboxes_per_owner',
  'default_exec_timeout',
  'max_exec_timeout',
  'max_ttl',
  'spawn_overflow',
  'spawn_queue_timeout',
  'max_spawn_queue',
];

/** `name{labels} value` lines of a Prometheus text body → value, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('diagnostics, metrics, health (spec 2.14–2.16, 4.8)', () => {
  let srv: TestServer;
  let kept: string;
  beforeAll(async () => {
    srv = await startTestServer({ defaults: { max_sandboxes: 50, max_exec_timeout: '5m' } });
    kept = (await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'alice' })).body.id;
    const gone = (await call(srv.url, 'POST', '/api/v1/sandboxes', {})).body.id;
    await call(srv.url, 'POST', `/api/v1/sandboxes/${kept}/exec`, { command: 'echo', args: ['x'] });
    await call(srv.url, 'POST', `/api/v1/sandboxes/${kept}/files`, { path: '/workspace/f', content: 'abc' });
    expect((await call(srv.url, 'GET', `/api/v1/sandboxes/${kept}/files?path=/workspace/nope`)).status).toBe(404);
    await call(srv.url, 'DELETE', `/api/v1/sandboxes/${gone}`);
    await call(srv.url, 'PUT', '/api/v1/quotas/alice', { max_sandboxes: 3, max_ttl: '1h' });
  });
  afterAll(async () => srv?.close());

  it('diagnostics carries every member of spec 2.15 with live values', async () => {
    const res = await call(srv.url, 'GET', '/api/v1/diagnostics');
    expect(res.status).toBe(200);
    const d = res.body;
    expect(Object.keys(d)).toEqual([
      'generated_at',
      'build',
      'process',
      'store',
      'limits',
      'scheduler',
      'quotas',
      'rate_limit',
      'providers',
      'workers',
      'leases',
      'sandboxes',
      'events',
      'operations',
      'pool',
      'warm',
      'preview',
      'replica',
      'leaders',
      'remediation',
      'redactions',
    ]);
    // One process on SQLite: this replica alone, leading every task there is.
    expect(d.replica).toEqual({ id: expect.stringMatching(/.+:\d+$/), shared: false, live: [d.replica.id] });
    expect(d.leaders).toEqual({ reaper: d.replica.id, reconcile: d.replica.id });
    expect(Math.abs(Date.parse(d.generated_at) - Date.now())).toBeLessThan(10_000);
    expect(d.build).toMatchObject({
      version: PKG_VERSION,
      goos: process.platform,
      goarch: process.arch === 'x64' ? 'amd64' : process.arch,
    });
    expect(d.process.uptime).toMatch(/^\d+(\.\d+)?(ms|s|m|h)/);
    expect(d.process.goroutines).toBeGreaterThan(0);
    for (const k of ['alloc', 'sys', 'heap_alloc']) expect(d.process.memory[k]).toBeGreaterThan(1024 * 1024);
    expect(typeof d.process.memory.gc_cycles).toBe('number');
    expect(d.store.healthy).toBe(true);
    expect(d.store.latency_ms).toBeGreaterThanOrEqual(0);
    expect(Object.keys(d.limits).sort()).toEqual([...LIMIT_KEYS].sort());
    expect(d.limits).toMatchObject({ max_sandboxes: 50, max_exec_timeout: '5m0s', spawn_overflow: 'reject' });
    expect(Object.keys(d.scheduler).sort()).toEqual([...SCHEDULER_KEYS].sort());
    expect(d.scheduler.worker_id).toBe('local');
    // Every spawn was placed, and each placement was timed.
    expect(d.scheduler.placements).toBeGreaterThan(0);
    expect(d.scheduler.placement_p99_ms).toBeGreaterThanOrEqual(d.scheduler.placement_p50_ms);
    expect(d.quotas).toEqual({ total: 1, with_max_sandboxes: 1, with_max_ttl: 1, with_max_exec_timeout: 0 });
    expect(Object.keys(d.rate_limit).sort()).toEqual([...RATE_KEYS].sort());
    expect(d.rate_limit.enabled).toBe(false);
    expect(d.providers).toHaveLength(1);
    expect(d.providers[0]).toMatchObject({ name: 'mock', healthy: true, default: true });
    expect(d.workers).toMatchObject({ total: 1, online: 1, stale: 0, unhealthy: 0 });
    expect(d.workers.items[0]).toMatchObject({ id: 'local', status: 'online', stale: false });
    expect(d.leases).toEqual({ total: 0, active: 0, expired: 0, by_holder: {} });
    expect(d.sandboxes).toEqual({
      total: 2,
      active: 1,
      by_state: { running: 1, destroyed: 1 },
      by_provider: { mock: 1 },
      by_worker: { local: 1 },
    });
    expect(d.events.events_total).toBeGreaterThanOrEqual(8);
    expect(d.events.history_size).toBe(d.events.events_total);
    expect(d.events.subscribers).toBe(0);
    const ops = Object.fromEntries(d.operations.map((o: { operation: string; provider: string }) => [`${o.operation}/${o.provider}`, o]));
    expect(ops['spawn/mock']).toMatchObject({ count: 2, success: 2, failure: 0 });
    expect(ops['exec/mock']).toMatchObject({ count: 1, success: 1, failure: 0 });
    expect(ops['write_file/mock']).toMatchObject({ count: 1, success: 1 });
    expect(ops['destroy/mock']).toMatchObject({ count: 1, success: 1 });
    const lat = ops['spawn/mock'].latency_ms;
    expect(lat.min).toBeGreaterThan(0);
    expect(lat.max).toBeGreaterThanOrEqual(lat.min);
    expect(lat.avg).toBeCloseTo(lat.total / 2, 2);
    // Redacted: no owner ids in summaries, and the list of what is hidden.
    expect(JSON.stringify(d.quotas)).not.toContain('alice');
    expect(d.redactions).toEqual(
      expect.arrayContaining([
        'provider secrets',
        'registry credentials',
        'environment secrets',
        'API keys',
        'worker tokens',
        'signing keys',
        'database credentials',
      ]),
    );
  });

  it('every remediation reference names a document in the repository', async () => {
    const d = (await call(srv.url, 'GET', '/api/v1/diagnostics')).body;
    expect(Object.keys(d.remediation)).toEqual(
      expect.arrayContaining(['provider_unhealthy', 'store_unhealthy', 'worker_stale', 'spawn_queue', 'sandbox_error']),
    );
    for (const path of Object.values(d.remediation) as string[]) {
      expect(path).toMatch(/^docs\/remediation\/[a-z-]+\.md$/);
      expect(existsSync(join(ROOT, path)), path).toBe(true);
      expect(readFileSync(join(ROOT, path), 'utf8')).toMatch(/^# /);
    }
  });

  it('JSON metrics has the spec 2.16 members first, in order, then sbx extras', async () => {
    const res = await call(srv.url, 'GET', '/api/v1/metrics');
    expect(res.status).toBe(200);
    const m = res.body;
    expect(Object.keys(m).slice(0, 15)).toEqual([
      'uptime',
      'goroutines',
      'memory_alloc',
      'memory_sys',
      'memory_heap_alloc',
      'gc_cycles',
      'sandboxes',
      'providers',
      'workers',
      'leases',
      'events',
      'scheduler',
      'operations',
      'quotas',
      'rate_limit',
    ]);
    expect(m.workers).toMatchObject({ total: 1, online: 1 });
    expect(m.workers.items.map((w: { id: string }) => w.id)).toEqual(['local']);
    expect(m.providers).toEqual({ total: 1, healthy: 1, items: [{ name: 'mock', healthy: true, default: true }] });
    expect(m.sandboxes.by_state).toEqual({ running: 1, destroyed: 1 });
    expect(m.memory_heap_alloc).toBeGreaterThan(0);
    expect(m.scheduler.spawn_overflow).toBe('reject');
    expect(m.quotas.total).toBe(1);

    // gc_cycles counts real collections: make garbage, then look again.
    let junk: unknown[] = [];
    for (let i = 0; i < 300_000; i++) junk.push({ i, s: `x${i}` });
    junk = [];
    await new Promise((r) => setTimeout(r, 50));
    const after = (await call(srv.url, 'GET', '/api/v1/metrics')).body;
    expect(after.gc_cycles).toBeGreaterThan(0);
    expect(junk).toHaveLength(0);
  });

  it('admin aliases serve the same documents', async () => {
    const d = await call(srv.url, 'GET', '/api/v1/admin/diagnostics');
    expect(d.status).toBe(200);
    expect(d.body.sandboxes.total).toBe(2);
    expect((await call(srv.url, 'GET', '/api/v1/admin/metrics')).body.providers.total).toBe(1);
    const p = await call(srv.url, 'GET', '/api/v1/admin/metrics/prometheus');
    expect(p.status).toBe(200);
    expect(p.text).toContain('sbx_sandboxes_active 1');
  });

  it('Prometheus text: own sbx_ registry, typed counters, queue, quota, rate-limit and route-templated HTTP metrics', async () => {
    await call(srv.url, 'GET', `/api/v1/sandboxes/${kept}`);
    const res = await call(srv.url, 'GET', '/api/v1/metrics/prometheus');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const t = res.text;
    for (const line of t.split('\n').filter((l) => l && !l.startsWith('#'))) expect(line).toMatch(/^sbx_/);
    const types = Object.fromEntries([...t.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
    for (const c of [
      'sbx_http_requests_total',
      'sbx_operations_total',
      'sbx_events_published_total',
      'sbx_spawn_queued_total',
      'sbx_spawn_dequeued_total',
      'sbx_spawn_queue_timeouts_total',
      'sbx_rate_limit_allowed_total',
      'sbx_rate_limit_limited_total',
      'sbx_rate_limit_evicted_total',
      'sbx_process_cpu_user_seconds_total',
    ])
      expect(types[c], c).toBe('counter');
    for (const g of [
      'sbx_spawn_queue_depth',
      'sbx_spawn_queue_max',
      'sbx_quotas',
      'sbx_quotas_with_limit',
      'sbx_rate_limit_enabled',
      'sbx_rate_limit_active_buckets',
      'sbx_sandboxes',
      'sbx_provider_healthy',
      'sbx_nodejs_heap_size_total_bytes',
    ]) {
      expect(types[g], g).toBe('gauge');
    }
    for (const h of ['sbx_http_request_duration_seconds', 'sbx_operation_duration_seconds']) expect(types[h], h).toBe('histogram');
    expect(sample(t, 'sbx_quotas')).toBe(1);
    expect(sample(t, 'sbx_quotas_with_limit{limit="max_ttl"}')).toBe(1);
    expect(sample(t, 'sbx_spawn_queue_max')).toBe(100);
    expect(sample(t, 'sbx_sandboxes{state="running"}')).toBe(1);
    expect(sample(t, 'sbx_provider_healthy{provider="mock",default="true"}')).toBe(1);
    expect(sample(t, 'sbx_operations_total{operation="spawn",provider="mock",outcome="success"}')).toBe(2);
    expect(sample(t, 'sbx_operation_duration_seconds_count{operation="exec",provider="mock",outcome="success"}')).toBe(1);
    // Routes by template, never the raw URL (ids would explode the label set).
    expect(sample(t, 'sbx_http_requests_total{method="GET",route="/api/v1/sandboxes/:id",status_code="200"}')).toBeGreaterThanOrEqual(1);
    expect(sample(t, 'sbx_http_requests_total{method="POST",route="/api/v1/sandboxes",status_code="201"}')).toBe(2);
    expect(t).not.toContain(kept);
    expect(t).not.toContain('alice');
    expect(sample(t, 'sbx_events_published_total')).toBeGreaterThanOrEqual(8);
  });

  it('health and liveness report the package version and a duration uptime', async () => {
    const h = await call(srv.url, 'GET', '/api/v1/health');
    expect(h.body).toMatchObject({ status: 'ok', version: PKG_VERSION });
    expect(h.body.uptime).toMatch(/^\d+(\.\d+)?(ms|s|m|h)/);
    const l = await call(srv.url, 'GET', '/api/v1/live');
    expect(l.body).toMatchObject({ status: 'alive', version: PKG_VERSION });
    const r = await call(srv.url, 'GET', '/api/v1/ready');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'ready', version: PKG_VERSION, ready_providers: 1, total_providers: 1 });
    expect(r.body.providers[0].name).toBe('mock');
    expect(r.body.code).toBeUndefined();
  });
});

describe('failures, readiness 503 and live counters', () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startTestServer({
      defaults: { max_sandboxes: 1, spawn_overflow: 'queue', spawn_queue_timeout: '1s' },
      rate_limit: { enabled: true, requests_per_minute: 60, burst: 3, key_by: 'owner' },
    });
  });
  afterAll(async () => srv?.close());

  it('counts provider failures per operation and publishes provider.failed / operation.failed', async () => {
    const deps = srv.plane.deps;
    deps.providers.register(instrumentProvider(new DownProvider('down'), deps.operations!));
    const sp = await call(srv.url, 'POST', '/api/v1/sandboxes', { provider: 'down' }, { 'X-User-ID': 'u1' });
    expect(sp.status).toBe(500);
    expect(sp.body.code).toBe('provider_error');
    const kinds = deps.bus
      .recent({ types: ['provider.failed', 'operation.failed'] })
      .map((e) => [e.type, e.data?.provider, e.data?.operation]);
    expect(kinds).toEqual([
      ['provider.failed', 'down', 'spawn'],
      ['operation.failed', 'down', 'spawn'],
    ]);
    const d = (await call(srv.url, 'GET', '/api/v1/diagnostics', undefined, { 'X-User-ID': 'u1' })).body;
    const row = d.operations.find((o: { operation: string; provider: string }) => o.operation === 'spawn' && o.provider === 'down');
    expect(row).toMatchObject({ count: 1, success: 0, failure: 1, last_error_code: 'provider_error' });
    expect(Date.parse(row.last_failure_at)).not.toBeNaN();
    const p = (await call(srv.url, 'GET', '/api/v1/metrics/prometheus', undefined, { 'X-User-ID': 'u1' })).text;
    expect(sample(p, 'sbx_operations_total{operation="spawn",provider="down",outcome="failure"}')).toBe(1);
    expect(sample(p, 'sbx_provider_healthy{provider="down",default="false"}')).toBe(0);
  });

  it('spawn queue timeouts and rate-limit rejections show in diagnostics and Prometheus', async () => {
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'q1' })).status).toBe(201);
    const t0 = Date.now();
    const queued = await call(srv.url, 'POST', '/api/v1/sandboxes', {}, { 'X-User-ID': 'q2' });
    expect(queued.status).toBe(429);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    // Flood one owner's bucket (burst 3).
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await call(srv.url, 'GET', '/api/v1/sandboxes', undefined, { 'X-User-ID': 'flooder' })).status);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(2);

    const d = (await call(srv.url, 'GET', '/api/v1/diagnostics', undefined, { 'X-User-ID': 'ops1' })).body;
    expect(d.scheduler).toMatchObject({ spawn_overflow: 'queue', spawn_queued_total: 1, spawn_queue_timeouts: 1, spawn_queue_depth: 0 });
    expect(d.rate_limit).toMatchObject({ enabled: true, requests_per_minute: 60, burst: 3, key_by: 'owner' });
    expect(d.rate_limit.limited_total).toBeGreaterThanOrEqual(2);
    expect(d.rate_limit.active_buckets).toBeGreaterThanOrEqual(3);
    expect(JSON.stringify(d)).not.toContain('flooder');
    const p = (await call(srv.url, 'GET', '/api/v1/metrics/prometheus', undefined, { 'X-User-ID': 'ops2' })).text;
    expect(sample(p, 'sbx_spawn_queued_total')).toBe(1);
    expect(sample(p, 'sbx_spawn_queue_timeouts_total')).toBe(1);
    expect(sample(p, 'sbx_rate_limit_enabled')).toBe(1);
    expect(sample(p, 'sbx_rate_limit_limited_total')).toBeGreaterThanOrEqual(2);
    expect(p).not.toContain('flooder');
  });

  it('readiness answers 503 with code and message when no provider is healthy', async () => {
    const deps = srv.plane.deps;
    // The only healthy provider's backend goes away: same name, a provider that cannot reach it.
    deps.providers.register(instrumentProvider(new DownProvider('mock'), deps.operations!));
    await call(srv.url, 'POST', '/api/v1/providers/test', undefined, { 'X-User-ID': 'ops3' }); // refresh the health cache
    const r = await call(srv.url, 'GET', '/api/v1/ready');
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ status: 'not_ready', code: 'unavailable', ready_providers: 0, total_providers: 2 });
    expect(r.body.message).toContain('0/2');
    expect(r.body.version).toBe(PKG_VERSION);
    expect(r.body.providers.map((p: { name: string; healthy: boolean; error?: string }) => [p.name, p.healthy, p.error])).toEqual([
      ['down', false, 'engine unreachable'],
      ['mock', false, 'engine unreachable'],
    ]);
  });
});
