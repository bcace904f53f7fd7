/**
 * Types of the typed client: the HTTP DTOs from src/contracts (type-only imports, so the client
 * loads no schema code at run time) plus shapes the contracts do not define yet.
 */
import type { Static } from '@sinclair/typebox';
import type { ExecChunk, ExecRequest, ExecResult } from '../contracts/exec.js';
import type { FileInfoDto } from '../contracts/files.js';
import type { AdmissionDecision, Sandbox, SpawnRequest } from '../contracts/sandboxes.js';
import type {
  Health as HealthSchema,
  HeartbeatRequest,
  PoolStatus as PoolStatusSchema,
  ProviderDetail,
  ProviderListItem,
  Readiness as ReadinessSchema,
  SnapshotSummary as SnapshotSummarySchema,
  Worker,
} from '../contracts/system.js';
import type { CreateTemplateRequest, Template, TemplateSpawnRequest, UpdateTemplateRequest } from '../contracts/templates.js';

export type {
  AdmissionDecision,
  CreateTemplateRequest,
  ExecChunk,
  ExecRequest,
  ExecResult,
  HeartbeatRequest,
  ProviderDetail,
  ProviderListItem,
  Sandbox,
  SpawnRequest,
  Template,
  TemplateSpawnRequest,
  UpdateTemplateRequest,
  Worker,
};
export type FileInfo = FileInfoDto;
export type Health = Static<typeof HealthSchema>;
export type Readiness = Static<typeof ReadinessSchema>;
export type PoolStatus = Static<typeof PoolStatusSchema>;
export type SnapshotSummary = Static<typeof SnapshotSummarySchema>;

/** Owner quota (spec 2.6). */
export interface OwnerQuota {
  owner_id: string;
  max_sandboxes: number;
  max_ttl: string;
  max_exec_timeout: string;
  created_at: string;
  updated_at: string;
}

/** Body of `PUT /quotas/{owner}`; omitted durations inherit the global default. */
export interface QuotaInput {
  max_sandboxes?: number;
  max_ttl?: string;
  max_exec_timeout?: string;
}

export interface QuotaSummary {
  total: number;
  with_max_sandboxes: number;
  with_max_ttl: number;
  with_max_exec_timeout: number;
}

export interface OwnerUsage {
  owner_id: string;
  active_sandboxes: number;
  max_sandboxes: number;
  max_ttl: string;
  max_exec_timeout: string;
  quota_configured: boolean;
}

/** Admin audit record (DESIGN.md §3). */
export interface AuditRecord {
  id: number | string;
  created_at: string;
  actor: string;
  method: string;
  path: string;
  status: number;
  duration_ms: number;
  request_id: string;
  remote_addr: string;
  user_agent: string;
}

export interface AuditQuery {
  limit?: number;
  actor?: string;
  method?: string;
  status?: number;
  path?: string;
  since?: string;
  until?: string;
}

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

/** Diagnostics and JSON metrics are large, read-only objects (spec 2.15, 2.16). */
export type Diagnostics = Record<string, unknown> & { generated_at?: string };
export type Metrics = Record<string, unknown>;

/** Exec options of the client: the request without the transport switches it sets itself. */
export type ExecInput = Omit<ExecRequest, 'stream' | 'stdin' | 'stdin_encoding'> & {
  /** Bytes for the command's stdin; sent base64-encoded. */
  stdin?: Uint8Array | string;
};

export interface RequestOptions {
  signal?: AbortSignal;
}
