import type { WarmShapeStats } from '../../../core/sandboxes/warm.js';
import { LEADER_TASKS } from '../../../core/replicas/replicas.js';
import type { QuotaSummary } from '../../../core/admission/quotas.js';
import type { RateLimitStats } from '../../../core/admission/rate-limiter.js';
import type { LimitsSnapshot, SchedulerStats } from '../../../core/admission/stats.js';
import type { OperationStat } from '../../../core/observability/operations.js';
import type { ProviderStatus } from '../../../core/providers/registry.js';
import { STALE_AFTER_MS } from '../../../core/scheduler/workers.js';
import type { Worker } from '../../../contracts/system.js';
import type { HttpDeps } from '../deps.js';
import { presentWorker } from '../presenters.js';
import { eventSubscribers } from '../event-streams.js';
import { buildInfo, processStats, type ProcessStats } from './process.js';

export interface SandboxesSummary {
  total: number;
  active: number;
  by_state: Record<string, number>;
  by_provider: Record<string, number>;
  by_worker: Record<string, number>;
}

export interface WorkersSummary {
  total: number;
  online: number;
  stale: number;
  unhealthy: number;
  items: Worker[];
}

export interface LeasesSummary {
  total: number;
  active: number;
  expired: number;
  by_holder: Record<string, number>;
}

/** Everything diagnostics, JSON metrics and Prometheus report, gathered once per request. */
export interface Snapshot {
  generated_at: string;
  process: ProcessStats;
  store: { healthy: boolean; latency_ms: number };
  limits: LimitsSnapshot;
  scheduler: SchedulerStats;
  quotas: QuotaSummary;
  rate_limit: RateLimitStats;
  providers: ProviderStatus[];
  workers: WorkersSummary;
  leases: LeasesSummary;
  sandboxes: SandboxesSummary;
  events: { subscribers: number; history_size: number; events_total: number };
  operations: OperationStat[];
  /** Pool mode (DESIGN §8): `{enabled: false}` when off. */
  pool: PoolSummary;
  /** Warm pools per shape (DESIGN §11). */
  warm: WarmShapeStats[];
  /** Live preview (DESIGN §9): the domain, whether tokens are required, and the proxy's traffic. */
  preview: {
    domain: string;
    auth: boolean;
    requests: number;
    upgrades: number;
    upstream_errors: number;
    bytes_in: number;
    bytes_out: number;
  };
  /** This replica (DESIGN §7): its id, whether the store is shared, the live replicas (null: store away). */
  replica: { id: string; shared: boolean; live: string[] | null; journal?: { cursor: number; outbox: number; dropped: number } };
  /** The replica holding each leader task; null when the store cannot say. */
  leaders: Record<string, string | null> | null;
}

export interface PoolSummary {
  enabled: boolean;
  vms?: number;
  max_vms?: number;
  total_users?: number;
  max_users_per_vm?: number;
  provider?: string;
  runtimes?: Array<{ runtime_id: string; users: number }>;
}

async function poolSummary(deps: HttpDeps): Promise<PoolSummary> {
  const settings = deps.settings.pool;
  if (!settings.enabled || !deps.pool) return { enabled: false };
  const view = await deps.pool.view();
  return {
    enabled: true,
    vms: view.vms,
    max_vms: settings.max_vms,
    total_users: view.total_users,
    max_users_per_vm: settings.max_users_per_vm,
    provider: settings.provider,
    runtimes: view.runtimes,
  };
}

/** Repo documents explaining what to do about each condition diagnostics can show. */
export const REMEDIATION: Record<string, string> = {
  provider_unhealthy: 'docs/remediation/provider-unhealthy.md',
  store_unhealthy: 'docs/remediation/store-unhealthy.md',
  worker_stale: 'docs/remediation/worker-stale.md',
  lease_expired: 'docs/remediation/lease-expired.md',
  spawn_queue: 'docs/remediation/spawn-queue.md',
  quota_exceeded: 'docs/remediation/quota-exceeded.md',
  rate_limited: 'docs/remediation/rate-limited.md',
  sandbox_error: 'docs/remediation/sandbox-error.md',
  event_subscriber_dropped: 'docs/remediation/event-stream.md',
};

/** What diagnostics, metrics and events never show. */
export const REDACTIONS = [
  'provider secrets',
  'registry credentials',
  'environment secrets',
  'API keys',
  'worker tokens',
  'signing keys',
  'database credentials',
  'rate-limit identities',
];

const ZERO_RATE_LIMIT: RateLimitStats = {
  enabled: false,
  requests_per_minute: 0,
  burst: 0,
  key_by: 'owner',
  active_buckets: 0,
  allowed_total: 0,
  limited_total: 0,
  evicted_total: 0,
  bucket_ttl: '0s',
  cleanup_interval: '0s',
};

/** Gathers every member; a failing source degrades to zeros instead of failing the whole report. */
export async function collectSnapshot(deps: HttpDeps): Promise<Snapshot> {
  const now = deps.clock.now();
  const [store, providers, sandboxes, workers, leases, quotas] = await Promise.all([
    storeHealth(deps),
    deps.providers.statuses().catch(() => [] as ProviderStatus[]),
    sandboxesSummary(deps, now).catch(() => ({ total: 0, active: 0, by_state: {}, by_provider: {}, by_worker: {} })),
    workersSummary(deps, now).catch(() => ({ total: 0, online: 0, stale: 0, unhealthy: 0, items: [] })),
    leasesSummary(deps, now).catch(() => ({ total: 0, active: 0, expired: 0, by_holder: {} })),
    deps.quotas.summary().catch(() => ({ total: 0, with_max_sandboxes: 0, with_max_ttl: 0, with_max_exec_timeout: 0 })),
  ]);
  const pool = await poolSummary(deps).catch((): PoolSummary => ({ enabled: deps.settings.pool.enabled }));
  const r = deps.replicas;
  const [live, leaders] = r ? await Promise.all([r.live().catch(() => null), r.leaders(LEADER_TASKS).catch(() => null)]) : [null, null];
  const journal = deps.journal?.stats();
  const replica = { id: r?.id ?? deps.settings.hostname, shared: r?.shared ?? false, live, ...(journal ? { journal } : {}) };
  const pv = deps.preview;
  const preview = {
    domain: pv?.service.settings.domain ?? '',
    auth: pv?.service.settings.auth ?? false,
    requests: 0,
    upgrades: 0,
    upstream_errors: 0,
    bytes_in: 0,
    bytes_out: 0,
    ...(pv ? pv.stats : {}),
  };
  return {
    generated_at: now.toISOString(),
    process: processStats(deps.startedAt),
    store,
    limits: deps.admission.limitsSnapshot(),
    scheduler: deps.admission.stats({ ...deps.locator.figures(), owner_quotas: quotas.total }),
    quotas,
    rate_limit: deps.rateLimiter?.stats() ?? ZERO_RATE_LIMIT,
    providers,
    workers,
    leases,
    sandboxes,
    events: { ...deps.bus.stats(), subscribers: eventSubscribers(deps) },
    operations: deps.operations?.snapshot() ?? [],
    pool,
    warm: deps.warm?.stats() ?? [],
    preview,
    replica,
    leaders,
  };
}

async function storeHealth(deps: HttpDeps): Promise<{ healthy: boolean; latency_ms: number }> {
  const h = await deps.storeProbe.check();
  return { healthy: h.healthy, latency_ms: Math.round(h.latency_ms * 1000) / 1000 };
}

const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};

async function sandboxesSummary(deps: HttpDeps, now: Date): Promise<SandboxesSummary> {
  // Counted by the database (DESIGN.md §13): a scrape never reads the sandboxes row by row.
  const tally = await deps.storeProbe.tally(now);
  const out: SandboxesSummary = { total: 0, active: 0, by_state: {}, by_provider: {}, by_worker: {} };
  const add = (m: Record<string, number>, k: string, n: number) => {
    m[k] = (m[k] ?? 0) + n;
  };
  for (const t of tally) {
    out.total += t.n;
    // A record past its TTL is expired for every reader, whatever the reaper has done yet.
    const state = t.state !== 'destroyed' && t.state !== 'expired' && t.past_ttl ? 'expired' : t.state;
    add(out.by_state, state, t.n);
    if (state === 'destroyed' || state === 'expired') continue;
    if (t.state === 'running' || t.state === 'paused' || t.state === 'unhealthy') out.active += t.n;
    add(out.by_provider, t.provider, t.n);
    add(out.by_worker, t.worker_id, t.n);
  }
  return out;
}

async function workersSummary(deps: HttpDeps, now: Date): Promise<WorkersSummary> {
  const items = (await deps.workers.list()).map((w) => presentWorker(w, STALE_AFTER_MS, now));
  const out: WorkersSummary = { total: items.length, online: 0, stale: 0, unhealthy: 0, items };
  for (const w of items) {
    if (w.stale) out.stale++;
    else if (w.status === 'online') out.online++;
    else if (w.status !== 'draining') out.unhealthy++;
  }
  return out;
}

async function leasesSummary(deps: HttpDeps, now: Date): Promise<LeasesSummary> {
  const rows = await deps.leases.list();
  const out: LeasesSummary = { total: rows.length, active: 0, expired: 0, by_holder: {} };
  for (const l of rows) {
    if (Date.parse(l.expires_at) > now.getTime()) {
      out.active++;
      bump(out.by_holder, l.holder_id);
    } else {
      out.expired++;
    }
  }
  return out;
}

/** Spec 2.15 diagnostics object. */
export function diagnosticsBody(deps: HttpDeps, s: Snapshot): Record<string, unknown> {
  return {
    generated_at: s.generated_at,
    build: buildInfo(deps.settings.version),
    process: s.process,
    store: { ...s.store, driver: deps.storeProbe.driver },
    limits: s.limits,
    scheduler: s.scheduler,
    quotas: s.quotas,
    rate_limit: s.rate_limit,
    providers: s.providers,
    workers: s.workers,
    leases: s.leases,
    sandboxes: s.sandboxes,
    events: s.events,
    operations: s.operations,
    pool: s.pool,
    warm: s.warm,
    preview: s.preview,
    replica: s.replica,
    leaders: s.leaders,
    remediation: REMEDIATION,
    redactions: REDACTIONS,
  };
}

/** Spec 2.16 JSON metrics object; members after `scheduler` are sbx's. */
export function metricsBody(deps: HttpDeps, s: Snapshot): Record<string, unknown> {
  return {
    uptime: s.process.uptime,
    goroutines: s.process.goroutines,
    memory_alloc: s.process.memory.alloc,
    memory_sys: s.process.memory.sys,
    memory_heap_alloc: s.process.memory.heap_alloc,
    gc_cycles: s.process.memory.gc_cycles,
    sandboxes: s.sandboxes,
    providers: {
      total: s.providers.length,
      healthy: s.providers.filter((p) => p.healthy).length,
      items: s.providers.map((p) => ({ name: p.name, healthy: p.healthy, default: p.default })),
    },
    workers: s.workers,
    leases: s.leases,
    events: s.events,
    scheduler: s.scheduler,
    operations: s.operations,
    quotas: s.quotas,
    rate_limit: s.rate_limit,
    uptime_seconds: s.process.uptime_seconds,
    store: s.store,
    version: deps.settings.version,
  };
}
