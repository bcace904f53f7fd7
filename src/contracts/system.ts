import { Type, type Static } from '@sinclair/typebox';
import { Duration, StringMap, Timestamp } from './common.js';

export const ProviderListItem = Type.Object(
  {
    name: Type.String(),
    healthy: Type.Boolean(),
    default: Type.Boolean(),
    latency_ms: Type.Integer(),
    last_checked: Timestamp,
    error: Type.Optional(Type.String()),
    capabilities: Type.Array(Type.String()),
    runtime_count: Type.Optional(Type.Integer()),
    /** A healthy provider's caveat (e.g. commands not isolated from host processes). */
    warning: Type.Optional(Type.String()),
  },
  { $id: 'ProviderListItem' },
);
export type ProviderListItem = Static<typeof ProviderListItem>;

export const ProviderDetail = Type.Object(
  {
    name: Type.String(),
    healthy: Type.Boolean(),
    default: Type.Boolean(),
    sandbox_count: Type.Integer(),
    health: ProviderListItem,
    /** The provider's settings (no secrets); providers with images add the server's default image. */
    config: Type.Object(
      {
        default_image: Type.Optional(Type.String({ description: "sbx: the server's defaults.image (providers with images: docker)" })),
        image_present: Type.Optional(
          Type.Union([Type.Boolean(), Type.Null()], {
            description: 'sbx: whether the engine has the default image now (no pull needed); null when it cannot be asked',
          }),
        ),
      },
      { additionalProperties: true },
    ),
  },
  { $id: 'ProviderDetail' },
);
export type ProviderDetail = Static<typeof ProviderDetail>;

export const ProviderTestResult = Type.Record(Type.String(), Type.Boolean());

export const WorkerCapacity = Type.Object({
  max_sandboxes: Type.Integer(),
  max_sandboxes_per_owner: Type.Integer(),
  rpc_url: Type.Optional(Type.String()),
  preview_domain: Type.Optional(Type.String()),
});

/** A worker's egress gateway verdicts so far (DESIGN §10), cumulative. */
export const EgressCounts = Type.Object(
  {
    allowed: Type.Integer({ minimum: 0 }),
    denied: Type.Integer({ minimum: 0 }),
    /** Requests sent on with a secret injected (DESIGN §15); absent from older workers. */
    injections: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  {
    additionalProperties: false,
    description: "sbx extension: verdicts of the worker's egress gateway for filtered sandboxes, counted since it first started",
  },
);

export const Worker = Type.Object(
  {
    id: Type.String(),
    hostname: Type.String(),
    status: Type.String(),
    providers: Type.Array(Type.String()),
    capabilities: Type.Array(Type.String()),
    capacity: WorkerCapacity,
    egress: Type.Optional(EgressCounts),
    last_heartbeat: Timestamp,
    created_at: Timestamp,
    updated_at: Timestamp,
    stale: Type.Boolean(),
  },
  { $id: 'Worker' },
);
export type Worker = Static<typeof Worker>;

export const HeartbeatRequest = Type.Object({
  hostname: Type.String({ minLength: 1 }),
  status: Type.Optional(Type.String()),
  providers: Type.Optional(Type.Array(Type.String())),
  capabilities: Type.Optional(Type.Array(Type.String())),
  capacity: Type.Optional(Type.Partial(WorkerCapacity)),
  egress: Type.Optional(EgressCounts),
});
export type HeartbeatRequest = Static<typeof HeartbeatRequest>;

/** What a worker's gateway denied (DESIGN §10), sent in batches to `POST /api/v1/worker/events`. */
export const WorkerEvent = Type.Object(
  {
    type: Type.Literal('network.denied'),
    sandbox_id: Type.String({ minLength: 1, maxLength: 128 }),
    host: Type.String({ maxLength: 512 }),
    port: Type.Integer({ minimum: 0, maximum: 65535 }),
    reason: Type.Union(
      ['no_rule', 'deny_rule', 'special_address', 'sni_mismatch', 'dns_failed', 'limit', 'secret_not_allowed'].map((r) => Type.Literal(r)),
    ),
  },
  { additionalProperties: false },
);
export type WorkerEvent = Static<typeof WorkerEvent>;
export const WorkerEventsRequest = Type.Object({ events: Type.Array(WorkerEvent, { maxItems: 500 }) }, { additionalProperties: false });
export type WorkerEventsRequest = Static<typeof WorkerEventsRequest>;
export const WorkerEventsResponse = Type.Object({
  accepted: Type.Integer({ description: 'events published' }),
  rejected: Type.Integer({ description: 'events about sandboxes this worker does not run (dropped)' }),
});

export const Lease = Type.Object({
  resource_id: Type.String(),
  holder_id: Type.String(),
  generation: Type.Integer(),
  expires_at: Timestamp,
});

/** Snapshot summary (spec 2.12, DESIGN.md §3, §10). */
export const SnapshotSummary = Type.Object({
  name: Type.String(),
  image: Type.String({
    description: "the provider's reference: sbx-snapshot/<name>:latest on docker, sbx-snapshot/<name> (a directory tree) on proot and mock",
  }),
  kernel: Type.Union([Type.String(), Type.Null()], { description: 'a microVM kernel; null for container and directory snapshots' }),
  size_bytes: Type.Integer(),
  created_at: Timestamp,
  provider: Type.String(),
});

export const PoolStatus = Type.Object({
  enabled: Type.Boolean(),
  vms: Type.Optional(Type.Integer()),
  max_vms: Type.Optional(Type.Integer()),
  total_users: Type.Optional(Type.Integer()),
  max_users_per_vm: Type.Optional(Type.Integer()),
  runtimes: Type.Optional(
    Type.Array(Type.Object({ runtime_id: Type.String(), users: Type.Integer() }), {
      description: 'sbx extension, admins only: each shared runtime and its live workspaces',
    }),
  ),
});

export const Health = Type.Object({
  status: Type.String(),
  version: Type.String(),
  uptime: Duration,
  providers: Type.Optional(Type.Unknown()),
  store: Type.Optional(Type.Unknown()),
});

export const Readiness = Type.Object({
  status: Type.String(),
  version: Type.String(),
  uptime: Duration,
  ready_providers: Type.Integer(),
  total_providers: Type.Integer(),
  providers: Type.Array(ProviderListItem),
  /** On 503 only: the error-body members (spec Part 7) beside the readiness fields. */
  code: Type.Optional(Type.String()),
  message: Type.Optional(Type.String()),
});

export const Labels = StringMap;
