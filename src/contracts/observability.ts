import { Type, type Static } from '@sinclair/typebox';
import { Duration, Timestamp } from './common.js';
import { ProviderListItem, Worker } from './system.js';

const Counts = Type.Record(Type.String(), Type.Integer());
/** Nested members whose exact shape belongs to another module: kept open, never trimmed. */
const Open = (props: Parameters<typeof Type.Object>[0], description?: string) =>
  Type.Object(props, { additionalProperties: true, ...(description ? { description } : {}) });

/** Event JSON (DESIGN.md §3): one frame's `data:` on the event stream. */
export const SbxEvent = Type.Object(
  {
    id: Type.Integer({ minimum: 1 }),
    type: Type.String(),
    timestamp: Timestamp,
    sandbox_id: Type.Optional(Type.String()),
    owner_id: Type.Optional(Type.String()),
    worker_id: Type.Optional(Type.String()),
    data: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { $id: 'Event' },
);
export type SbxEvent = Static<typeof SbxEvent>;

export const EventStreamQuery = Type.Object({
  types: Type.Optional(Type.String({ description: 'Comma-separated kinds or group wildcards: sandbox.created,exec.*' })),
  sandbox_id: Type.Optional(Type.String()),
  last_event_id: Type.Optional(Type.String({ description: 'Replay history after this id (same as the Last-Event-ID header)' })),
});
export type EventStreamQuery = Static<typeof EventStreamQuery>;

export const OperationStat = Type.Object(
  {
    operation: Type.String(),
    provider: Type.String(),
    count: Type.Integer(),
    success: Type.Integer(),
    failure: Type.Integer(),
    latency_ms: Type.Object({ total: Type.Number(), min: Type.Number(), max: Type.Number(), avg: Type.Number() }),
    last_error_code: Type.Optional(Type.String()),
    last_failure_at: Type.Optional(Timestamp),
  },
  { $id: 'OperationStat' },
);

const SandboxesSummary = Type.Object({
  total: Type.Integer(),
  active: Type.Integer(),
  by_state: Counts,
  by_provider: Counts,
  by_worker: Counts,
});
const LeasesSummary = Type.Object({ total: Type.Integer(), active: Type.Integer(), expired: Type.Integer(), by_holder: Counts });
const EventsSummary = Type.Object({ subscribers: Type.Integer(), history_size: Type.Integer(), events_total: Type.Integer() });
const QuotaSummary = Open({
  total: Type.Integer(),
  with_max_sandboxes: Type.Integer(),
  with_max_ttl: Type.Integer(),
  with_max_exec_timeout: Type.Integer(),
});
const RateLimit = Open({
  enabled: Type.Boolean(),
  requests_per_minute: Type.Integer(),
  burst: Type.Integer(),
  key_by: Type.String(),
  active_buckets: Type.Integer(),
  allowed_total: Type.Integer(),
  limited_total: Type.Integer(),
  evicted_total: Type.Integer(),
  bucket_ttl: Duration,
  cleanup_interval: Duration,
});
const Scheduler = Open({}, 'Spawn queue and placement: spawn_overflow, spawn_queue_depth, … (spec 2.15)');
const Limits = Open({}, 'Global limits: max_sandboxes, max_sandboxes_per_owner, default_exec_timeout, … (spec 2.15)');
const StoreHealth = Open({ healthy: Type.Boolean(), latency_ms: Type.Number() });

/** Workers with counts, in diagnostics and (spec 2.16 "as in diagnostics") in JSON metrics. */
const WorkersSummary = Type.Object({
  total: Type.Integer(),
  online: Type.Integer(),
  stale: Type.Integer(),
  unhealthy: Type.Integer(),
  items: Type.Array(Worker),
});

/** Spec 2.15: read-only and redacted. */
export const Diagnostics = Type.Object(
  {
    generated_at: Timestamp,
    build: Open({ version: Type.String(), goos: Type.String(), goarch: Type.String() }),
    process: Type.Object({
      uptime: Duration,
      uptime_seconds: Type.Integer(),
      goroutines: Type.Integer(),
      memory: Type.Object({ alloc: Type.Integer(), sys: Type.Integer(), heap_alloc: Type.Integer(), gc_cycles: Type.Integer() }),
    }),
    store: StoreHealth,
    limits: Limits,
    scheduler: Scheduler,
    quotas: QuotaSummary,
    rate_limit: RateLimit,
    providers: Type.Array(ProviderListItem),
    workers: WorkersSummary,
    leases: LeasesSummary,
    sandboxes: SandboxesSummary,
    events: EventsSummary,
    operations: Type.Array(OperationStat),
    pool: Type.Object(
      {
        enabled: Type.Boolean(),
        vms: Type.Optional(Type.Integer()),
        max_vms: Type.Optional(Type.Integer()),
        total_users: Type.Optional(Type.Integer()),
        max_users_per_vm: Type.Optional(Type.Integer()),
        provider: Type.Optional(Type.String()),
        runtimes: Type.Optional(Type.Array(Type.Object({ runtime_id: Type.String(), users: Type.Integer() }))),
      },
      { description: 'sbx extension: pool mode (DESIGN §8)' },
    ),
    warm: Type.Array(
      Type.Object({
        shape: Type.Object({
          provider: Type.String(),
          image: Type.String(),
          memory_mb: Type.Integer(),
          vcpus: Type.Integer(),
          network: Type.Union([Type.String(), Type.Null()]),
        }),
        ready: Type.Integer(),
        target: Type.Integer(),
        hits: Type.Integer(),
        misses: Type.Integer(),
      }),
      {
        description:
          'sbx extension: warm pools per shape (DESIGN §11): runtimes ready, the target, spawns that claimed ' +
          'one (hits) and spawns of the shape that found none (misses)',
      },
    ),
    preview: Type.Object(
      {
        domain: Type.String(),
        auth: Type.Boolean(),
        requests: Type.Integer(),
        upgrades: Type.Integer(),
        upstream_errors: Type.Integer(),
        bytes_in: Type.Integer(),
        bytes_out: Type.Integer(),
      },
      { description: 'sbx extension: live preview (DESIGN §9) and its proxied traffic' },
    ),
    replica: Type.Object(
      {
        id: Type.String({ description: 'server.replica_id, or hostname:port' }),
        shared: Type.Boolean({ description: 'true when replicas share the store (PostgreSQL)' }),
        live: Type.Union([Type.Array(Type.String()), Type.Null()], {
          description: 'replicas whose lease is live; null while the store cannot say',
        }),
        journal: Type.Optional(
          Type.Object(
            { cursor: Type.Integer(), outbox: Type.Integer(), dropped: Type.Integer() },
            { description: 'the shared event journal: last id read, events waiting to be written, events dropped from a full outbox' },
          ),
        ),
      },
      { description: 'sbx extension: this replica (DESIGN §7 "Replicas")' },
    ),
    leaders: Type.Union([Type.Record(Type.String(), Type.Union([Type.String(), Type.Null()])), Type.Null()], {
      description: 'sbx extension: the replica holding each leader task (reaper, reconcile); null while the store cannot say',
    }),
    remediation: Type.Record(Type.String(), Type.String()),
    redactions: Type.Array(Type.String()),
  },
  { $id: 'Diagnostics' },
);

/** Spec 2.16; members after `scheduler` are sbx's: operations, quotas, rate_limit, then the rest. */
export const Metrics = Type.Object(
  {
    uptime: Duration,
    goroutines: Type.Integer(),
    memory_alloc: Type.Integer(),
    memory_sys: Type.Integer(),
    memory_heap_alloc: Type.Integer(),
    gc_cycles: Type.Integer(),
    sandboxes: SandboxesSummary,
    providers: Type.Object({
      total: Type.Integer(),
      healthy: Type.Integer(),
      items: Type.Array(Type.Object({ name: Type.String(), healthy: Type.Boolean(), default: Type.Boolean() })),
    }),
    workers: WorkersSummary,
    leases: LeasesSummary,
    events: EventsSummary,
    scheduler: Scheduler,
    operations: Type.Array(OperationStat),
    quotas: QuotaSummary,
    rate_limit: RateLimit,
    uptime_seconds: Type.Integer(),
    store: StoreHealth,
    version: Type.String(),
  },
  { $id: 'Metrics' },
);
