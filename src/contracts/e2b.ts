import { Type, type Static } from '@sinclair/typebox';
import { MAX_INT32, StringMap, Timestamp } from './common.js';
import { E2bNetwork } from './e2b-catalog.js';

/**
 * E2B's control-plane REST API under `/e2b` (DESIGN.md §14), shaped as E2B's published OpenAPI
 * document shapes it (camelCase, `sandboxID`, seconds for timeouts), so E2B's own SDKs work
 * unmodified. Written from the published field names; sbx's own schemas stay in sandboxes.ts.
 */

/** E2B's error body: the HTTP status again as a number (the SDK reads `code === 404`), and a message. */
export const E2bError = Type.Object({ code: Type.Integer(), message: Type.String() }, { $id: 'E2bError' });
export type E2bError = Static<typeof E2bError>;

/** The envd version the create answer names: one E2B's SDK accepts (≥ 0.1.0) with every feature it gates on (≤ 0.5.7). */
export const E2B_ENVD_VERSION = '0.5.7';

/** Seconds, as E2B takes timeouts (int32, ≥ 0; sbx refuses 0 as a TTL with 400). */
const Seconds = Type.Integer({ minimum: 0, maximum: MAX_INT32 });

const VolumeMountE2b = Type.Object({ name: Type.String(), path: Type.String() }, { additionalProperties: false });

/**
 * `POST /e2b/sandboxes` and `/e2b/v2/sandboxes` (E2B's NewSandbox). Every field E2B's SDK may send
 * is named (an unknown one is a 400); the ones sbx cannot honour yet are refused with 400 by the
 * route when set to something other than "off" (autoPauseMemory, mcp, iam, and the network options sbx cannot enforce).
 */
export const E2bNewSandbox = Type.Object(
  {
    templateID: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    timeout: Type.Optional(Seconds),
    metadata: Type.Optional(StringMap),
    envVars: Type.Optional(StringMap),
    secure: Type.Optional(Type.Boolean()),
    autoPause: Type.Optional(Type.Boolean()),
    autoPauseMemory: Type.Optional(Type.Boolean()),
    autoResume: Type.Optional(Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false })),
    allow_internet_access: Type.Optional(Type.Boolean()),
    network: Type.Optional(E2bNetwork),
    mcp: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
    iam: Type.Optional(Type.Unknown()),
    volumeMounts: Type.Optional(Type.Array(VolumeMountE2b)),
  },
  { $id: 'E2bNewSandbox', additionalProperties: false },
);
export type E2bNewSandbox = Static<typeof E2bNewSandbox>;

/** E2B's Sandbox: the create, resume and connect answer. */
export const E2bSandbox = Type.Object(
  {
    templateID: Type.String(),
    sandboxID: Type.String(),
    alias: Type.Optional(Type.String()),
    clientID: Type.String(),
    envdVersion: Type.String(),
    envdAccessToken: Type.Optional(Type.String()),
    trafficAccessToken: Type.Union([Type.String(), Type.Null()]),
    domain: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'E2bSandbox' },
);
export type E2bSandbox = Static<typeof E2bSandbox>;

const ListedFields = {
  templateID: Type.String(),
  alias: Type.Optional(Type.String()),
  sandboxID: Type.String(),
  clientID: Type.String(),
  startedAt: Timestamp,
  endAt: Timestamp,
  cpuCount: Type.Integer(),
  memoryMB: Type.Integer(),
  diskSizeMB: Type.Integer(),
  metadata: StringMap,
  state: Type.Union([Type.Literal('running'), Type.Literal('paused')]),
  envdVersion: Type.String(),
  volumeMounts: Type.Array(VolumeMountE2b),
};

/** E2B's ListedSandbox: one entry of the v1 and v2 lists. */
export const E2bListedSandbox = Type.Object(ListedFields, { $id: 'E2bListedSandbox' });
export type E2bListedSandbox = Static<typeof E2bListedSandbox>;

/** E2B's SandboxDetail: `GET /e2b/sandboxes/{id}`. */
export const E2bSandboxDetail = Type.Object(
  {
    ...ListedFields,
    domain: Type.Union([Type.String(), Type.Null()]),
    lifecycle: Type.Object({ autoResume: Type.Boolean(), onTimeout: Type.Union([Type.Literal('kill'), Type.Literal('pause')]) }),
    /** `false` for a sandbox without a network (sbx `none`). */
    allowInternetAccess: Type.Optional(Type.Boolean()),
    /** A filtered sandbox's egress, as E2B words it (deny everything, allow the list): to its owner and admins only. */
    network: Type.Optional(Type.Object({ allowOut: Type.Array(Type.String()), denyOut: Type.Array(Type.String()) })),
  },
  { $id: 'E2bSandboxDetail' },
);
export type E2bSandboxDetail = Static<typeof E2bSandboxDetail>;

/** E2B's SandboxMetric (sbx answers an empty list until providers report usage). */
export const E2bSandboxMetric = Type.Object({
  timestamp: Timestamp,
  timestampUnix: Type.Integer(),
  cpuCount: Type.Integer(),
  cpuUsedPct: Type.Number(),
  memUsed: Type.Integer(),
  memTotal: Type.Integer(),
  memCache: Type.Integer(),
  diskUsed: Type.Integer(),
  diskTotal: Type.Integer(),
});

/** `GET /e2b/sandboxes`: `metadata` is a URL-encoded `key=value&…` string, as the SDK sends it. */
export const E2bListQuery = Type.Object({ metadata: Type.Optional(Type.String({ maxLength: 8192 })) });
export type E2bListQuery = Static<typeof E2bListQuery>;

/** `GET /e2b/v2/sandboxes`: `state` is a comma-separated list of `running`, `paused`. */
export const E2bListV2Query = Type.Object({
  metadata: Type.Optional(Type.String({ maxLength: 8192 })),
  state: Type.Optional(Type.String({ maxLength: 64 })),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
  nextToken: Type.Optional(Type.String({ minLength: 1, maxLength: 1024 })),
  startedAfter: Type.Optional(Type.String({ maxLength: 64 })),
  template: Type.Optional(Type.String({ maxLength: 256 })),
  order: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')])),
});
export type E2bListV2Query = Static<typeof E2bListV2Query>;

/** Response header that carries the next page's token (the SDK's paginator reads it). */
export const E2B_NEXT_TOKEN_HEADER = 'x-next-token';

/** `POST /e2b/sandboxes/{id}/timeout`: the new end is now + timeout (shorter or longer). */
export const E2bTimeoutBody = Type.Object({ timeout: Seconds }, { additionalProperties: false });
/** `POST /e2b/sandboxes/{id}/refreshes`: keeps the sandbox alive at least `duration` seconds more (0–3600). */
export const E2bRefreshBody = Type.Object(
  { duration: Type.Optional(Type.Integer({ minimum: 0, maximum: 3600 })) },
  { additionalProperties: false },
);
/** `POST /e2b/sandboxes/{id}/connect` (and v2): a running sandbox lives at least `timeout` seconds more. */
export const E2bConnectBody = Type.Object(
  { timeout: Type.Optional(Seconds), memory: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
/** `POST /e2b/sandboxes/{id}/resume` (E2B's deprecated ResumedSandbox). */
export const E2bResumeBody = Type.Object(
  { timeout: Type.Optional(Seconds), autoPause: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
/** `POST /e2b/sandboxes/{id}/pause`. */
export const E2bPauseBody = Type.Object({ memory: Type.Optional(Type.Boolean()) }, { additionalProperties: false });
/** `GET /e2b/sandboxes/{id}/metrics`: unix seconds. */
export const E2bMetricsQuery = Type.Object({
  start: Type.Optional(Type.Integer({ minimum: 0 })),
  end: Type.Optional(Type.Integer({ minimum: 0 })),
});
