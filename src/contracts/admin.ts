import { Type, type Static } from '@sinclair/typebox';
import { Duration, Timestamp } from './common.js';
import { Lease } from './system.js';

/** One admin audit record (DESIGN.md §3). `actor` names the credential kind, never its value. */
export const AuditRecord = Type.Object({
  id: Type.String(),
  created_at: Timestamp,
  actor: Type.String({ description: '`admin-key`, `api-key` or `anonymous`, followed by `:<X-User-ID>` when one was sent' }),
  method: Type.String(),
  path: Type.String(),
  status: Type.Integer(),
  duration_ms: Type.Integer(),
  request_id: Type.String(),
  remote_addr: Type.String(),
  user_agent: Type.String(),
});
export type AuditRecord = Static<typeof AuditRecord>;

/** Column order of the CSV audit export. */
export const AUDIT_CSV_COLUMNS = [
  'id',
  'created_at',
  'actor',
  'method',
  'path',
  'status',
  'duration_ms',
  'request_id',
  'remote_addr',
  'user_agent',
] as const;

export const AuditQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, description: 'newest N records (default 100)' })),
    actor: Type.Optional(
      Type.String({ description: 'actor prefix: `api-key` matches `api-key` and `api-key:<user>`, `api-key:dave` only that user' }),
    ),
    method: Type.Optional(Type.String({ description: 'HTTP method, any case' })),
    status: Type.Optional(Type.Integer({ minimum: 100, maximum: 599 })),
    path: Type.Optional(Type.String({ description: 'path prefix' })),
    since: Type.Optional(Type.String({ description: 'inclusive lower bound on created_at (RFC 3339)' })),
    until: Type.Optional(Type.String({ description: 'inclusive upper bound on created_at (RFC 3339)' })),
    format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')])),
  },
  { additionalProperties: false },
);
export type AuditQuery = Static<typeof AuditQuery>;

export const WorkerDeleted = Type.Object({ status: Type.Literal('deleted') });

export const LeaseRenewRequest = Type.Object({ ttl: Duration });
export type LeaseRenewRequest = Static<typeof LeaseRenewRequest>;
export const LeaseRenewResponse = Type.Object({ lease: Lease });
