/**
 * Types of the typed client: the HTTP DTOs from src/contracts (type-only imports, so the client
 * loads no schema code at run time), plus the event JSON and the client's own option shapes.
 */
import type { Static } from '../contracts/common.js';
import type { ExecChunk, ExecRequest, ExecResult } from '../contracts/exec.js';
import type { FileInfoDto, WatchEventDto } from '../contracts/files.js';
import type { AuditQuery as AuditQuerySchema, AuditRecord } from '../contracts/admin.js';
import type { Diagnostics as DiagnosticsSchema, Metrics as MetricsSchema } from '../contracts/observability.js';
import type { OwnerQuota, OwnerUsage, QuotaInput, QuotaSummary } from '../contracts/quotas.js';
import type { AdmissionDecision, ForkRequest, Sandbox, SpawnRequest } from '../contracts/sandboxes.js';
import type {
  Health as HealthSchema,
  HeartbeatRequest,
  Lease as LeaseSchema,
  PoolStatus as PoolStatusSchema,
  ProviderDetail,
  ProviderListItem,
  Readiness as ReadinessSchema,
  SnapshotSummary as SnapshotSummarySchema,
  Worker,
  WorkerEventsRequest,
} from '../contracts/system.js';
import type { CreateTemplateRequest, Template, TemplateSpawnRequest, UpdateTemplateRequest } from '../contracts/templates.js';
import type { Volume as VolumeSchema, VolumeMount as VolumeMountSchema } from '../contracts/volumes.js';
import type { CreateSecretRequest, Secret, UpdateSecretRequest, WorkerSandboxSecrets } from '../contracts/secrets.js';

export type {
  AdmissionDecision,
  AuditRecord,
  OwnerQuota,
  OwnerUsage,
  QuotaInput,
  QuotaSummary,
  CreateTemplateRequest,
  ExecChunk,
  ExecRequest,
  ExecResult,
  ForkRequest,
  HeartbeatRequest,
  ProviderDetail,
  ProviderListItem,
  Sandbox,
  SpawnRequest,
  Template,
  TemplateSpawnRequest,
  UpdateTemplateRequest,
  Worker,
  WorkerEventsRequest,
  CreateSecretRequest,
  Secret,
  UpdateSecretRequest,
  WorkerSandboxSecrets,
};
export type FileInfo = FileInfoDto;
/** One file watch event (`old_path` on renames; `overflow` ends the stream). */
export type WatchEvent = WatchEventDto;
export type Health = Static<typeof HealthSchema>;
export type Readiness = Static<typeof ReadinessSchema>;
export type PoolStatus = Static<typeof PoolStatusSchema>;
export type SnapshotSummary = Static<typeof SnapshotSummarySchema>;
/** A volume (DESIGN.md §10). */
export type Volume = Static<typeof VolumeSchema>;
/** A volume mounted into a sandbox: `{name, mount_path}`. */
export type VolumeMount = Static<typeof VolumeMountSchema>;
/** A lease (spec 2.10). */
export type Lease = Static<typeof LeaseSchema>;

/** Console lines with the server's cursor (`X-Log-Cursor`); no cursor = a server without the sbx extension. */
export interface LogPage {
  lines: string[];
  cursor?: number;
}

/** Audit filters of `GET /api/v1/admin/audit` (the client picks `format` itself). */
export type AuditQuery = Omit<AuditQuerySchema, 'format'>;

/** Event JSON (DESIGN.md §3). */
export interface SbxEvent {
  id: number;
  type: string;
  timestamp: string;
  sandbox_id?: string;
  owner_id?: string;
  worker_id?: string;
  data?: Record<string, unknown>;
}

/** Diagnostics and JSON metrics (spec 2.15, 2.16). */
export type Diagnostics = Static<typeof DiagnosticsSchema>;
export type Metrics = Static<typeof MetricsSchema>;

/** Exec options of the client: the request without the transport switches it sets itself. */
export type ExecInput = Omit<ExecRequest, 'stream' | 'stdin' | 'stdin_encoding'> & {
  /** Bytes for the command's stdin; sent base64-encoded. */
  stdin?: Uint8Array | string;
};

export interface RequestOptions {
  signal?: AbortSignal;
}

/** Spawn options: `idempotencyKey` makes a retry answer the first sandbox instead of spawning again. */
export interface SpawnOptions extends RequestOptions {
  idempotencyKey?: string;
}
