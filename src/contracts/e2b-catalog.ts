import { Type, type Static } from '@sinclair/typebox';
import { StringMap, Timestamp } from './common.js';

/**
 * The newer surface of E2B's control-plane API under `/e2b` (DESIGN.md §14): the create body's
 * `network`, `Secret`, snapshots and `Volume`, shaped as E2B's published OpenAPI document shapes
 * them (written from the published field names). sbx's own schemas stay in their own files.
 */

const Rule = Type.String({ minLength: 1, maxLength: 253 });
const Rules = Type.Array(Rule, { maxItems: 64 });

/** E2B's SandboxNetworkTransform: headers a proxy would set on matching requests. */
const E2bNetworkTransform = Type.Object(
  { headers: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 8192 }))) },
  { additionalProperties: false },
);

/** E2B's per-host rules: `{host: [{transform?}]}`. */
const E2bNetworkRules = Type.Record(
  Type.String({ minLength: 1, maxLength: 253 }),
  Type.Array(Type.Object({ transform: Type.Optional(E2bNetworkTransform) }, { additionalProperties: false }), { maxItems: 16 }),
);

const E2bEgressProxy = Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]);

/** E2B's SandboxNetworkConfig (the create body's `network`). */
export const E2bNetwork = Type.Object(
  {
    allowOut: Type.Optional(Rules),
    denyOut: Type.Optional(Rules),
    allowPublicTraffic: Type.Optional(Type.Boolean()),
    maskRequestHost: Type.Optional(Type.String({ maxLength: 253 })),
    httpsPorts: Type.Optional(Type.Array(Type.Integer({ minimum: 1, maximum: 65535 }), { maxItems: 64 })),
    egressProxy: Type.Optional(E2bEgressProxy),
    rules: Type.Optional(E2bNetworkRules),
  },
  { $id: 'E2bNetwork', additionalProperties: false },
);
export type E2bNetwork = Static<typeof E2bNetwork>;

/** E2B's SandboxNetworkUpdateConfig: `PUT /e2b/sandboxes/{id}/network` (omitted fields are cleared). */
export const E2bNetworkUpdate = Type.Object(
  {
    allow_internet_access: Type.Optional(Type.Boolean()),
    allowOut: Type.Optional(Rules),
    denyOut: Type.Optional(Rules),
    egressProxy: Type.Optional(E2bEgressProxy),
    rules: Type.Optional(E2bNetworkRules),
  },
  { additionalProperties: false },
);
export type E2bNetworkUpdate = Static<typeof E2bNetworkUpdate>;

/** `POST /e2b/sandboxes/{id}/snapshots` (E2B's SandboxSnapshotRequest). */
export const E2bSnapshotBody = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })) },
  { additionalProperties: false },
);
export type E2bSnapshotBody = Static<typeof E2bSnapshotBody>;

/** E2B's SnapshotInfo: the id a create from it names as its template, and its names. */
export const E2bSnapshotInfo = Type.Object({ snapshotID: Type.String(), names: Type.Array(Type.String()) });
export type E2bSnapshotInfo = Static<typeof E2bSnapshotInfo>;

/** `GET /e2b/snapshots`: filtered by the sandbox they were taken of, or by name; paginated by name. */
export const E2bSnapshotsQuery = Type.Object({
  sandboxID: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
  nextToken: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
});
export type E2bSnapshotsQuery = Static<typeof E2bSnapshotsQuery>;

/** `POST /e2b/volumes` (E2B's NewVolume). */
export const E2bNewVolume = Type.Object({ name: Type.String({ minLength: 1, maxLength: 256 }) }, { additionalProperties: false });
/** E2B's Volume (list entries). */
export const E2bVolume = Type.Object({ volumeID: Type.String(), name: Type.String() });
/**
 * E2B's VolumeAndToken (create and get answers). sbx serves no volume content API: `token` is empty
 * and `domain` is this server's, so the SDK never sends a volume request to E2B's public hosts.
 */
export const E2bVolumeAndToken = Type.Object({ volumeID: Type.String(), name: Type.String(), token: Type.String(), domain: Type.String() });

/** E2B's NewSecret: `POST /e2b/secrets`. sbx takes the hosts a value may go to from `metadata.hosts`. */
export const E2bNewSecret = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 256 }), value: Type.String(), metadata: Type.Optional(StringMap) },
  { additionalProperties: false },
);
export type E2bNewSecret = Static<typeof E2bNewSecret>;
/** E2B's SecretUpdate: `POST /e2b/secrets/{id}` (a new value; `metadata.hosts` replaces the hosts). */
export const E2bSecretUpdate = Type.Object({ value: Type.String(), metadata: Type.Optional(StringMap) }, { additionalProperties: false });
export type E2bSecretUpdate = Static<typeof E2bSecretUpdate>;
/** E2B's Secret: never the value. */
export const E2bSecret = Type.Object({
  secretID: Type.String(),
  name: Type.String(),
  currentVersion: Type.Integer(),
  metadata: StringMap,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});
export type E2bSecret = Static<typeof E2bSecret>;
export const E2bSecretsQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
  nextToken: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
});
export type E2bSecretsQuery = Static<typeof E2bSecretsQuery>;
