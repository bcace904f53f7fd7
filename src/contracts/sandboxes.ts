import { Type, type Static } from '@sinclair/typebox';
import { Duration, MAX_INT32, StringMap, Timestamp } from './common.js';
import { VolumeMount, VolumeMounts } from './volumes.js';
import { SecretBindings } from './secrets.js';

export const SandboxId = Type.String({ minLength: 1, maxLength: 128 });

/** `auto_pause` of a spawn or template (DESIGN.md §16). */
export const AutoPause = Type.String({
  minLength: 1,
  maxLength: 64,
  description: 'sbx extension: paused after this long without activity (execs, streams, WebSockets, previews); 0s = never',
});

/** `on_expire` of a spawn or template (DESIGN.md §16). */
export const OnExpire = Type.Union([Type.Literal('destroy'), Type.Literal('pause')], {
  description: 'sbx extension: what the TTL does: destroy (default), or pause — then destroyed defaults.paused_ttl later unless resumed',
});

/** Network of a sandbox (DESIGN.md §10): `none`, `bridge`, `filtered` (docker). */
export const Network = Type.Union([Type.Literal('none'), Type.Literal('bridge'), Type.Literal('filtered')], {
  description:
    'sbx extension: none (no network at all), bridge, or filtered (only what the egress rules allow; docker); ' +
    'unset: the template, defaults.network, then providers.docker.network_mode',
});

/** Egress allow and deny lists (DESIGN.md §10); each rule is checked by the server (400 naming a bad one). */
export const Egress = Type.Object(
  {
    allow: Type.Optional(
      Type.Array(Type.String(), {
        description: 'rules a connection may match: host name, *.name, IPv4/IPv6 address or CIDR, optional :port ([v6]:port); at most 64',
      }),
    ),
    deny: Type.Optional(Type.Array(Type.String(), { description: 'rules checked first: a match is refused; at most 64' })),
  },
  {
    additionalProperties: false,
    description:
      'sbx extension: egress rules of a filtered sandbox (given without network, it means filtered); deny, then allow, else denied',
  },
);
export type Egress = Static<typeof Egress>;

/** The lists as the server keeps them (canonical), shown to the owner and admins only. */
export const EgressLists = Type.Object(
  { allow: Type.Array(Type.String()), deny: Type.Array(Type.String()) },
  { description: 'sbx extension: the egress rules of a filtered sandbox, canonical; shown to its owner and admins only' },
);

export const Sandbox = Type.Object(
  {
    id: Type.String(),
    state: Type.String(),
    provider: Type.String(),
    image: Type.String(),
    memory_mb: Type.Integer(),
    vcpus: Type.Integer(),
    created_at: Timestamp,
    expires_at: Timestamp,
    metadata: StringMap,
    preview_domain: Type.String(),
    worker_id: Type.String({
      description: 'the worker that runs the sandbox: local (a lone node), a replica id, or a remote worker id (DESIGN §7)',
    }),
    owner_id: Type.Optional(Type.String()),
    template: Type.Optional(Type.String()),
    network: Type.Optional(
      Type.String({
        description: 'sbx extension: the network the sandbox got (none, bridge or the docker network; host for proot and mock)',
      }),
    ),
    snapshot: Type.Optional(Type.String({ description: 'sbx extension: the snapshot it started from' })),
    forked_from: Type.Optional(
      Type.String({
        description: 'sbx extension (DESIGN §16): the id of the sandbox this one is a fork of; absent for every other sandbox',
      }),
    ),
    volumes: Type.Optional(Type.Array(VolumeMount, { description: 'sbx extension: the volumes it mounts' })),
    egress: Type.Optional(EgressLists),
    auto_pause: Type.Optional(Type.String({ description: 'sbx extension: its auto-pause window (DESIGN §16)' })),
    on_expire: Type.Optional(OnExpire),
    pause_at: Type.Optional(Timestamp),
    preview_token: Type.Optional(
      Type.String({
        description:
          'sbx extension: with server.preview_auth, the token a preview visitor needs (X-Sbx-Preview-Token or ' +
          '?sbx_token=); shown to the owner and admins only',
      }),
    ),
  },
  { $id: 'Sandbox' },
);
export type Sandbox = Static<typeof Sandbox>;

export const SpawnRequest = Type.Object(
  {
    image: Type.Optional(Type.String({ minLength: 1 })),
    provider: Type.Optional(Type.String({ minLength: 1 })),
    memory_mb: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
    vcpus: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_INT32 })),
    ttl: Type.Optional(Duration),
    metadata: Type.Optional(StringMap),
    owner_id: Type.Optional(Type.String()),
    network: Type.Optional(Network),
    egress: Type.Optional(Egress),
    snapshot: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 256,
        description: 'sbx extension: start from this snapshot (its provider and image; leave image out)',
      }),
    ),
    volumes: Type.Optional(VolumeMounts),
    secrets: Type.Optional(SecretBindings),
    auto_pause: Type.Optional(AutoPause),
    on_expire: Type.Optional(OnExpire),
  },
  { $id: 'SpawnRequest', additionalProperties: false },
);
export type SpawnRequest = Static<typeof SpawnRequest>;

/** `PUT /api/v1/sandboxes/{id}/egress` (DESIGN.md §10): replaces both lists. */
export const EgressUpdateRequest = Type.Object(
  {
    allow: Type.Optional(Type.Array(Type.String())),
    deny: Type.Optional(Type.Array(Type.String())),
  },
  { $id: 'EgressUpdateRequest', additionalProperties: false },
);
export type EgressUpdateRequest = Static<typeof EgressUpdateRequest>;

export const ExtendRequest = Type.Object({ ttl: Duration }, { additionalProperties: false });
export type ExtendRequest = Static<typeof ExtendRequest>;

/** `POST /api/v1/sandboxes/{id}/fork` (DESIGN.md §16). */
export const ForkRequest = Type.Object(
  {
    count: Type.Optional(Type.Integer({ minimum: 1, maximum: 10, description: 'how many forks, 1–10 (default 1)' })),
    ttl: Type.Optional(Duration),
    metadata: Type.Optional(StringMap),
  },
  { additionalProperties: false },
);
export type ForkRequest = Static<typeof ForkRequest>;
export const ForkResponse = Type.Object({ sandboxes: Type.Array(Sandbox) });
export type ForkResponse = Static<typeof ForkResponse>;

export const DestroyResponse = Type.Object({ status: Type.Literal('destroyed') });
export const PruneResponse = Type.Object({ pruned: Type.Integer() });

/** Response header of `GET …/logs` with the console cursor (an sbx extension; the body stays an array of strings). */
export const LOG_CURSOR_HEADER = 'X-Log-Cursor';

/** `GET /api/v1/sandboxes` query (DESIGN.md §5, §13): without `limit` the whole array. */
export const ListSandboxesQuery = Type.Object({
  id_prefix: Type.Optional(
    Type.String({ maxLength: 128, description: 'sbx extension: only sandboxes whose id starts with this string (matched literally)' }),
  ),
  limit: Type.Optional(
    Type.Integer({
      minimum: 1,
      maximum: 1000,
      description:
        'sbx extension: at most this many sandboxes, oldest first; while more remain the answer has a `Link: <…>; rel="next"` header',
    }),
  ),
  after: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 1024,
      description: 'sbx extension, only with `limit`: the cursor from the `Link` header of the previous page (opaque, signed)',
    }),
  ),
});
export type ListSandboxesQuery = Static<typeof ListSandboxesQuery>;

export const LogsQuery = Type.Object({
  lines: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000, default: 100 })),
  after: Type.Optional(
    Type.Integer({
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description:
        'sbx extension: only lines recorded after this cursor (the X-Log-Cursor of an earlier answer), oldest ' +
        'first, at most `lines`. A cursor beyond the newest line starts over from the oldest line kept.',
    }),
  ),
});

export const AdmissionDecision = Type.Object(
  {
    allowed: Type.Boolean(),
    queueable: Type.Boolean(),
    reason: Type.Optional(Type.String()),
    active_sandboxes: Type.Integer(),
    max_sandboxes: Type.Integer(),
    active_owner_sandboxes: Type.Integer(),
    max_owner_sandboxes: Type.Integer(),
    max_ttl: Duration,
  },
  { $id: 'AdmissionDecision' },
);
export type AdmissionDecision = Static<typeof AdmissionDecision>;
