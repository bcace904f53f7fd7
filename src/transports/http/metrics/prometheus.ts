import type { FastifyInstance } from 'fastify';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { HttpDeps } from '../deps.js';
import { routeEntry, type RouteEntry } from '../route-table.js';
import { buildInfo, startGcCounter } from './process.js';
import { secretScrubber } from './redact.js';
import type { Snapshot } from './snapshot.js';

const PREFIX = 'sbx_';

/** A counter that mirrors a monotonic total kept elsewhere (admission, rate limiter, bus). */
class MirroredCounter {
  private last = new Map<string, number>();
  constructor(readonly counter: Counter<string>) {}
  sync(total: number, labels: Record<string, string> = {}): void {
    const key = JSON.stringify(labels);
    const prev = this.last.get(key) ?? 0;
    if (total > prev) this.counter.inc(labels, total - prev);
    this.last.set(key, Math.max(prev, total));
  }
}

/**
 * The Prometheus view of one control plane: its own Registry (never the global one, so several
 * planes in one process stay apart), HTTP and operation histograms fed live, and gauges set from
 * one snapshot at scrape time.
 */
export class PrometheusMetrics {
  readonly registry = new Registry();
  private readonly scrub: (text: string) => string;
  readonly httpDuration: Histogram<string>;
  readonly httpRequests: Counter<string>;
  private readonly g: Record<string, Gauge<string>> = {};
  private readonly c: Record<string, MirroredCounter> = {};

  constructor(deps: HttpDeps) {
    const r = this.registry;
    this.scrub = secretScrubber(deps.secrets);
    collectDefaultMetrics({ register: r, prefix: PREFIX });
    this.httpDuration = new Histogram({
      name: `${PREFIX}http_request_duration_seconds`,
      help: 'HTTP request duration by route template and status code',
      labelNames: ['method', 'route', 'status_code'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [r],
    });
    this.httpRequests = new Counter({
      name: `${PREFIX}http_requests_total`,
      help: 'HTTP requests by route template and status code',
      labelNames: ['method', 'route', 'status_code'],
      registers: [r],
    });
    const opDuration = new Histogram({
      name: `${PREFIX}operation_duration_seconds`,
      help: 'Provider operation latency',
      labelNames: ['operation', 'provider', 'outcome'],
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [r],
    });
    const opTotal = new Counter({
      name: `${PREFIX}operations_total`,
      help: 'Provider operations by outcome',
      labelNames: ['operation', 'provider', 'outcome'],
      registers: [r],
    });
    // Pause and resume (DESIGN.md §16): how often, why, and what a resume costs.
    const pauses = new Counter({
      name: `${PREFIX}sandbox_pauses_total`,
      help: 'Sandboxes paused, by reason (requested, auto_pause, on_expire)',
      labelNames: ['reason'],
      registers: [r],
    });
    const resumes = new Histogram({
      name: `${PREFIX}sandbox_resume_seconds`,
      help: 'Time a resume took (provider thaw and store), by reason (requested, activity)',
      labelNames: ['reason'],
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [r],
    });
    deps.bus.subscribe((e) => {
      const reason = String(e.data?.reason ?? 'requested');
      if (e.type === 'sandbox.paused') pauses.inc({ reason });
      else if (e.type === 'sandbox.resumed') resumes.observe({ reason }, Number(e.data?.duration_ms ?? 0) / 1000);
    });
    deps.operations?.onRecord((s) => {
      const labels = { operation: s.operation, provider: s.provider, outcome: s.ok ? 'success' : 'failure' };
      opDuration.observe(labels, s.latency_ms / 1000);
      opTotal.inc(labels);
    });

    const gauge = (name: string, help: string, labelNames: string[] = []) => {
      this.g[name] = new Gauge({ name: PREFIX + name, help, labelNames, registers: [r] });
    };
    const counter = (name: string, help: string, labelNames: string[] = []) => {
      this.c[name] = new MirroredCounter(new Counter({ name: PREFIX + name, help, labelNames, registers: [r] }));
    };
    gauge('build_info', 'Build information (always 1)', ['version', 'goos', 'goarch']);
    gauge('uptime_seconds', 'Seconds since the control plane started');
    gauge('store_healthy', '1 when the store answers');
    gauge('store_latency_seconds', 'Store round-trip latency');
    gauge('sandboxes', 'Sandboxes by state', ['state']);
    gauge('sandboxes_active', 'Sandboxes counted against limits');
    gauge('sandboxes_by_provider', 'Live sandboxes by provider', ['provider']);
    gauge('provider_healthy', '1 when the provider reports healthy', ['provider', 'default']);
    gauge('provider_health_latency_seconds', 'Latency of the last provider health check', ['provider']);
    gauge('workers', 'Workers by condition', ['condition']);
    gauge('leases', 'Leases by condition', ['condition']);
    gauge('event_subscribers', 'Connected event stream subscribers');
    gauge('event_history_size', 'Events kept for replay');
    counter('events_published_total', 'Events published on the bus');
    gauge('spawn_queue_depth', 'Spawns waiting in the queue');
    gauge('spawn_queue_max', 'Configured maximum spawn queue length');
    gauge('spawn_queue_timeout_seconds', 'Configured spawn queue timeout');
    gauge('spawn_queue_wait_max_seconds', 'Longest finished spawn queue wait');
    gauge('spawn_queue_wait_avg_seconds', 'Average finished spawn queue wait');
    counter('spawn_queued_total', 'Spawns that entered the queue');
    counter('spawn_dequeued_total', 'Queued spawns admitted');
    counter('spawn_queue_timeouts_total', 'Queued spawns that timed out');
    counter('spawn_queue_waits_total', 'Finished spawn queue waits');
    counter('spawn_queue_wait_seconds_total', 'Total time finished spawns waited in the queue');
    gauge('quotas', 'Owner quotas configured');
    gauge('quotas_with_limit', 'Owner quotas setting each limit', ['limit']);
    gauge('rate_limit_enabled', '1 when API rate limiting is on');
    gauge('rate_limit_requests_per_minute', 'Token bucket refill rate');
    gauge('rate_limit_burst', 'Token bucket size');
    gauge('rate_limit_active_buckets', 'Rate-limit buckets in memory');
    counter('rate_limit_allowed_total', 'Requests allowed by the rate limiter');
    counter('rate_limit_limited_total', 'Requests rejected by the rate limiter');
    counter('rate_limit_evicted_total', 'Idle rate-limit buckets evicted');
    gauge('pool_vms', 'Live shared runtimes of the pool (pool mode)');
    gauge('pool_max_vms', 'Configured maximum shared runtimes (pool mode)');
    gauge('pool_users', 'Live workspaces in the pool (pool mode)');
    gauge('warm_ready', 'Warm runtimes ready per shape (DESIGN §11)', ['provider', 'image']);
    gauge('warm_target', 'Warm runtimes wanted per shape', ['provider', 'image']);
    counter('warm_hits_total', 'Spawns that claimed a warm runtime', ['provider', 'image']);
    counter('warm_misses_total', 'Spawns of a warmed shape that found none ready', ['provider', 'image']);
    counter('preview_requests_total', 'Preview requests proxied to sandboxes, by kind (http, upgrade)', ['kind']);
    counter('preview_bytes_total', 'Preview bytes proxied, by direction (in: to sandboxes, out: to visitors)', ['direction']);
    counter('preview_upstream_errors_total', 'Preview requests whose sandbox port could not be reached or cut the connection');
    counter('egress_connections_total', 'Egress gateway verdicts on connections and requests of filtered sandboxes', ['verdict']);
    counter('egress_secret_injections_total', 'Requests the egress gateway sent on with a secret value injected (DESIGN §15)');
  }

  /** Records one finished HTTP request under its route template (never the raw URL). */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    const labels = { method, route, status_code: String(status) };
    this.httpDuration.observe(labels, seconds);
    this.httpRequests.inc(labels);
  }

  /** Sets every gauge and mirrored counter from the snapshot, then renders the text format. */
  async render(deps: HttpDeps, s: Snapshot): Promise<string> {
    const { g, c } = this;
    for (const gauge of Object.values(g)) gauge.reset();
    const build = buildInfo(deps.settings.version);
    g.build_info!.set({ version: build.version, goos: build.goos, goarch: build.goarch }, 1);
    g.uptime_seconds!.set(s.process.uptime_seconds);
    g.store_healthy!.set(s.store.healthy ? 1 : 0);
    g.store_latency_seconds!.set(s.store.latency_ms / 1000);
    for (const [state, n] of Object.entries(s.sandboxes.by_state)) g.sandboxes!.set({ state }, n);
    g.sandboxes_active!.set(s.sandboxes.active);
    for (const [provider, n] of Object.entries(s.sandboxes.by_provider)) g.sandboxes_by_provider!.set({ provider }, n);
    for (const p of s.providers) {
      g.provider_healthy!.set({ provider: p.name, default: String(p.default) }, p.healthy ? 1 : 0);
      g.provider_health_latency_seconds!.set({ provider: p.name }, p.latency_ms / 1000);
    }
    for (const k of ['online', 'stale', 'unhealthy'] as const) g.workers!.set({ condition: k }, s.workers[k]);
    for (const k of ['active', 'expired'] as const) g.leases!.set({ condition: k }, s.leases[k]);
    g.event_subscribers!.set(s.events.subscribers);
    g.event_history_size!.set(s.events.history_size);
    c.events_published_total!.sync(s.events.events_total);
    const q = s.scheduler;
    g.spawn_queue_depth!.set(q.spawn_queue_depth);
    g.spawn_queue_max!.set(q.max_spawn_queue);
    g.spawn_queue_timeout_seconds!.set(deps.settings.defaults.spawn_queue_timeout_ms / 1000);
    g.spawn_queue_wait_max_seconds!.set(q.spawn_queue_wait_max_ms / 1000);
    g.spawn_queue_wait_avg_seconds!.set(q.spawn_queue_wait_avg_ms / 1000);
    c.spawn_queued_total!.sync(q.spawn_queued_total);
    c.spawn_dequeued_total!.sync(q.spawn_dequeued_total);
    c.spawn_queue_timeouts_total!.sync(q.spawn_queue_timeouts);
    c.spawn_queue_waits_total!.sync(q.spawn_queue_wait_count);
    c.spawn_queue_wait_seconds_total!.sync(q.spawn_queue_wait_total_ms / 1000);
    g.quotas!.set(s.quotas.total);
    g.quotas_with_limit!.set({ limit: 'max_sandboxes' }, s.quotas.with_max_sandboxes);
    g.quotas_with_limit!.set({ limit: 'max_ttl' }, s.quotas.with_max_ttl);
    g.quotas_with_limit!.set({ limit: 'max_exec_timeout' }, s.quotas.with_max_exec_timeout);
    const rl = s.rate_limit;
    g.rate_limit_enabled!.set(rl.enabled ? 1 : 0);
    g.rate_limit_requests_per_minute!.set(rl.requests_per_minute);
    g.rate_limit_burst!.set(rl.burst);
    g.rate_limit_active_buckets!.set(rl.active_buckets);
    c.rate_limit_allowed_total!.sync(rl.allowed_total);
    c.rate_limit_limited_total!.sync(rl.limited_total);
    c.rate_limit_evicted_total!.sync(rl.evicted_total);
    if (s.pool.enabled) {
      g.pool_vms!.set(s.pool.vms ?? 0);
      g.pool_max_vms!.set(s.pool.max_vms ?? 0);
      g.pool_users!.set(s.pool.total_users ?? 0);
    }
    for (const w of s.warm) {
      const labels = { provider: w.shape.provider, image: w.shape.image };
      g.warm_ready!.inc(labels, w.ready);
      g.warm_target!.inc(labels, w.target);
      c.warm_hits_total!.sync(w.hits, labels);
      c.warm_misses_total!.sync(w.misses, labels);
    }
    const pv = s.preview;
    c.preview_requests_total!.sync(pv.requests, { kind: 'http' });
    c.preview_requests_total!.sync(pv.upgrades, { kind: 'upgrade' });
    c.preview_bytes_total!.sync(pv.bytes_in, { direction: 'in' });
    c.preview_bytes_total!.sync(pv.bytes_out, { direction: 'out' });
    c.preview_upstream_errors_total!.sync(pv.upstream_errors);
    c.egress_connections_total!.sync(deps.egress?.allowed ?? 0, { verdict: 'allowed' });
    c.egress_connections_total!.sync(deps.egress?.denied ?? 0, { verdict: 'denied' });
    c.egress_secret_injections_total!.sync(deps.egress?.injections ?? 0);
    return this.scrub(await this.registry.metrics());
  }
}

const byDeps = new WeakMap<HttpDeps, PrometheusMetrics>();

/** The one PrometheusMetrics of this control plane (created on first use). */
export function prometheusFor(deps: HttpDeps): PrometheusMetrics {
  let m = byDeps.get(deps);
  if (!m) {
    m = new PrometheusMetrics(deps);
    byDeps.set(deps, m);
  }
  return m;
}

/**
 * Times every request under the `metric` name the route table gives its route (the URL template,
 * never the raw URL); requests no route matched are `unmatched`.
 */
export function installHttpMetrics(app: FastifyInstance, deps: HttpDeps, table: readonly RouteEntry[]): void {
  const metrics = prometheusFor(deps);
  startGcCounter();
  // The table is complete once the app serves, so each route's label is looked up once.
  const labels = new Map<string, string>();
  const labelOf = (method: string, url: string | undefined): string => {
    if (url === undefined) return 'unmatched';
    const key = `${method} ${url}`;
    let label = labels.get(key);
    if (label === undefined) {
      label = routeEntry(table, method, url)?.metric ?? 'unmatched';
      labels.set(key, label);
    }
    return label;
  };
  app.addHook('onResponse', async (request, reply) => {
    const route = labelOf(request.method, request.routeOptions.url);
    metrics.observeRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
  });
}
