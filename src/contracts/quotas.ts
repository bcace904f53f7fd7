import { Type, type Static } from '@sinclair/typebox';
import { Duration, MAX_INT32, Timestamp } from './common.js';

/** Owner quota (spec 2.6). Durations render as strings; `0s` means "inherits the global default". */
export const OwnerQuota = Type.Object(
  {
    owner_id: Type.String(),
    max_sandboxes: Type.Integer(),
    max_ttl: Duration,
    max_exec_timeout: Duration,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { $id: 'OwnerQuota' },
);
export type OwnerQuota = Static<typeof OwnerQuota>;

/** Body of `PUT /quotas/{ownerID}` (spec 4.4). Omitted durations inherit the global default. */
export const QuotaInput = Type.Object(
  {
    max_sandboxes: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_INT32, description: 'Must not be negative; 0 inherits max_sandboxes_per_owner' }),
    ),
    max_ttl: Type.Optional(Type.String({ description: 'Whole seconds, e.g. 1h; 0s inherits the global default' })),
    max_exec_timeout: Type.Optional(Type.String({ description: 'Whole seconds, e.g. 10m; 0s inherits the global default' })),
  },
  { $id: 'QuotaInput', additionalProperties: false },
);
export type QuotaInput = Static<typeof QuotaInput>;

/** Quota summary (spec 2.6): counts only, no owner ids. */
export const QuotaSummary = Type.Object(
  {
    total: Type.Integer(),
    with_max_sandboxes: Type.Integer(),
    with_max_ttl: Type.Integer(),
    with_max_exec_timeout: Type.Integer(),
  },
  { $id: 'QuotaSummary' },
);
export type QuotaSummary = Static<typeof QuotaSummary>;

/** Owner usage (spec 2.6): effective limits, quota over global defaults. */
export const OwnerUsage = Type.Object(
  {
    owner_id: Type.String(),
    active_sandboxes: Type.Integer(),
    max_sandboxes: Type.Integer(),
    max_ttl: Duration,
    max_exec_timeout: Duration,
    quota_configured: Type.Boolean(),
  },
  { $id: 'OwnerUsage' },
);
export type OwnerUsage = Static<typeof OwnerUsage>;
