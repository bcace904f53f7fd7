/**
 * Ports: the interfaces core drives. Adapters (stores, providers) implement them; compose wires them.
 * Every method is asynchronous; provider methods take an AbortSignal so a cancelled request, a
 * deadline and a remote worker look the same to core.
 */

import type { ProcessStore } from './process-port.js';
import type { WarmStore } from './warm-port.js';
import type { PoolUidStore } from './pool-port.js';
import type { SecretStore } from './secrets/store-port.js';
import type { SharedState } from './replica-port.js';
import type { EgressLists } from './network/rules.js';

// ---------------------------------------------------------------- time and ids

/**
 * The time of day. Core reads it only through this port (scripts/check-deps.mjs rejects
 * `Date.now()` and `new Date()` in core). Durations (exec duration, health latency, retry budgets)
 * are measured with `performance.now()`: a monotonic stopwatch, not a time of day, so a fake clock
 * in tests does not freeze them and a wall-clock step does not bend them.
 */
export interface Clock {
  now(): Date;
}

export interface IdSource {
  /** `sb-` + short random suffix. */
  sandboxId(): string;
  /** Random opaque id (request ids, event ids, installation id). */
  randomId(bytes?: number): string;
}

// ---------------------------------------------------------------- records

export type SandboxState = 'running' | 'paused' | 'destroyed' | 'unhealthy' | 'expired' | 'error';

/** States whose runtime exists and holds resources (DESIGN.md §16: `paused` is alive and counts). */
export const ALIVE_STATES: readonly SandboxState[] = ['running', 'paused', 'unhealthy', 'error'];

/** A sandbox as stored. Timestamps are ISO 8601 UTC strings. */
export interface SandboxRecord {
  id: string;
  state: SandboxState;
  provider: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  created_at: string;
  updated_at: string;
  expires_at: string;
  metadata: Record<string, string>;
  /** Owner for quotas and ownership checks; null when none was given. */
  owner_id: string | null;
  /** Owning worker (`local` in single-node mode). Internal. */
  worker_id: string;
  /** Provider runtime id (container id, directory, …). Internal. Null until the provider answered. */
  runtime_id: string | null;
  /** Template the sandbox was spawned from, if any. */
  template: string | null;
  /** The network it got (`none`, `bridge`, a docker network, `host`); absent on rows from before networks. */
  network?: string | null;
  /** Volumes it mounts (DESIGN.md §10); absent or empty = none. */
  volumes?: VolumeMount[] | null;
  /** The snapshot it started from, if any. */
  snapshot?: string | null;
  /** The sandbox it was forked from (DESIGN.md §16), if any; shown as `forked_from`. */
  forked_from?: string | null;
  /**
   * The fork image it started from (DESIGN.md §16): a name the provider gave its copy of the
   * parent's filesystem, shared by the forks of one request and removed with the last of them.
   * Internal.
   */
  fork?: string | null;
  /** Egress allow and deny lists of a filtered sandbox (DESIGN.md §10), canonical; absent otherwise. */
  egress?: EgressLists | null;
  /**
   * Environment variables every command in the sandbox gets (DESIGN.md §14: E2B's `envVars`), for
   * the command planes to apply; never shown in an API answer, an event or a log (values may be secrets).
   */
  env?: Record<string, string> | null;
  /**
   * Random seed of the sandbox's envd access token (DESIGN.md §14), hex: the token is derived from it
   * and the installation secret (`core/auth/access-token.ts`), so the row alone does not give it.
   * Absent: no token (its envd plane needs none).
   */
  access_token_seed?: string | null;
  /** Paused after this long without activity (DESIGN.md §16), ms; absent/null: never. */
  auto_pause_ms?: number | null;
  /** What the TTL does (DESIGN.md §16): `pause` pauses at `pause_at`; absent/null: destroy at `expires_at`. */
  on_expire?: 'destroy' | 'pause' | null;
  /** With `on_expire: pause`, when the TTL ends and the sandbox is paused; `expires_at` is then `pause_at` + `defaults.paused_ttl`. */
  pause_at?: string | null;
  /** With `on_expire: pause`, the TTL a resume gives afresh (ms). */
  ttl_ms?: number | null;
}

/** A volume mounted into a sandbox: its name and the absolute, normalized path it appears at. */
export interface VolumeMount {
  name: string;
  mount_path: string;
}

export interface TemplateRecord {
  name: string;
  image: string | null;
  memory_mb: number | null;
  vcpus: number | null;
  /** Duration string as given (validated), or null. */
  ttl: string | null;
  provider: string | null;
  metadata: Record<string, string>;
  /** `none`, `bridge` or null (the server default). */
  network?: string | null;
  /** Snapshot its spawns start from, or null. */
  snapshot?: string | null;
  /** Volumes its spawns mount, or null/empty. */
  volumes?: VolumeMount[] | null;
  /** Warm runtimes kept ready for this template's shape (DESIGN.md §11); null/absent: none. */
  warm?: number | null;
  /** Egress lists of its spawns (network `filtered`), canonical; null/absent: none. */
  egress?: EgressLists | null;
  /** Secrets its spawns bind (DESIGN.md §15), resolved in the spawner's namespace; null/absent: none. */
  secrets?: string[] | null;
  /** `auto_pause` of its spawns (duration string, DESIGN.md §16); null/absent: the server default. */
  auto_pause?: string | null;
  /** `on_expire` of its spawns; null/absent: destroy. */
  on_expire?: 'destroy' | 'pause' | null;
  created_at: string;
  updated_at: string;
}

export interface QuotaRecord {
  owner_id: string;
  max_sandboxes: number;
  /** Milliseconds; 0 = inherit the global default. */
  max_ttl_ms: number;
  /** Milliseconds; 0 = inherit the global default. */
  max_exec_timeout_ms: number;
  created_at: string;
  updated_at: string;
}

export interface WorkerCapacity {
  max_sandboxes: number;
  max_sandboxes_per_owner: number;
  rpc_url?: string;
  preview_domain?: string;
}

export interface WorkerRecord {
  id: string;
  hostname: string;
  status: string;
  providers: string[];
  capabilities: string[];
  capacity: WorkerCapacity;
  /** Its egress gateway's verdicts so far (DESIGN §10), as its last heartbeat counted them. */
  egress?: EgressCounts;
  last_heartbeat: string;
  created_at: string;
  updated_at: string;
}

/** Egress verdicts counted by a gateway since it was first started (cumulative, kept across restarts). */
export interface EgressCounts {
  allowed: number;
  denied: number;
  /** Requests sent on with a secret's value injected (DESIGN §15); absent from older workers. */
  injections?: number;
}

export interface LeaseRecord {
  resource_id: string;
  holder_id: string;
  generation: number;
  expires_at: string;
}

export interface AuditRecord {
  id: string;
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

export interface AuditFilter {
  limit?: number;
  /** Prefix match on the actor (`api-key` finds `api-key:dave`). */
  actor?: string;
  method?: string;
  status?: number;
  /** Prefix match on the path. */
  path?: string;
  since?: string;
  until?: string;
}

export interface SandboxFilter {
  states?: SandboxState[];
  owner_id?: string;
  worker_id?: string;
  /** Ids starting with this string (matched literally: `%` and `_` are no wildcards). */
  id_prefix?: string;
  /** Only sandboxes whose `expires_at` is after this ISO timestamp. */
  expires_after?: string;
  /** Only sandboxes whose `expires_at` is at or before this ISO timestamp (past their TTL). */
  expires_by?: string;
  /** Only sandboxes whose `pause_at` is set and at or before this ISO timestamp (`on_expire: pause`, DESIGN.md §16). */
  pause_due_by?: string;
  /**
   * Ownership applied in the query: rows without a private owner (none, or a derived `key/…`,
   * `ip/…` owner) plus, when `owner_id` is a string, that owner's rows.
   */
  visible_to?: { owner_id: string | null };
  /** Keyset paging: only rows after this position in (created_at, id) order; the row itself may be gone. */
  after?: { created_at: string; id: string };
  /** At most this many rows (after filtering and sorting). */
  limit?: number;
}

export type LeaseResult = { ok: true; lease: LeaseRecord } | { ok: false; reason: 'not_found' | 'held_by_other' | 'expired' };

// ---------------------------------------------------------------- store

/** Opening, migrating and closing a store (Store.driver names the SQL dialect). */
export interface StoreLifecycle {
  readonly driver: string;
  /** State that replicas share (admission slots, event journal); absent on a one-process store. */
  readonly shared?: SharedState;
  /** Applies pending versioned migrations. Idempotent. */
  migrate(): Promise<void>;
  close(): Promise<void>;
  /** Round-trips the store; resolves with the latency in ms or rejects. */
  ping(): Promise<number>;
}

export interface MetaStore {
  /** Key/value for installation facts (installation id, schema version). */
  getMeta(key: string): Promise<string | null>;
  setMeta(key: string, value: string): Promise<void>;
  /**
   * Stores `value` under `key` unless a value is already there, atomically, and returns the value
   * that is stored: the first writer wins, so replicas starting at once agree on one value.
   */
  claimMeta(key: string, value: string): Promise<string>;
}

/** Live counts (DESIGN.md §13): what admission reads instead of listing sandboxes. */
export interface LiveCounts {
  /** Live sandboxes (running, paused or unhealthy, expiry after `now`). */
  total: number;
  /** The earliest expiry among them: when capacity opens by itself. */
  next_expiry: string | null;
  /** Live sandboxes of each owner asked for (absent = 0). */
  by_owner: Record<string, number>;
}

export interface SandboxTally {
  state: SandboxState;
  provider: string;
  worker_id: string;
  /** `expires_at` at or before the time asked. */
  past_ttl: boolean;
  n: number;
}

export interface SandboxStore {
  insertSandbox(rec: SandboxRecord): Promise<void>;
  /** Index-only counts of live sandboxes at `now`, in total and for `owners`. */
  countLive(now: string, owners: readonly string[]): Promise<LiveCounts>;
  /** Every row counted by state, provider, worker and whether it is past its TTL at `now` (metrics). */
  tallySandboxes(now: string): Promise<SandboxTally[]>;
  /** Live sandboxes per worker, and per worker for `owner` (null = none asked). */
  countLiveByWorker(
    now: string,
    owner: string | null,
  ): Promise<{ by_worker: Record<string, number>; by_worker_for_owner: Record<string, number> }>;
  /** Sandboxes of `provider` a list shows at `now` (running, unhealthy, error; expiry after `now`), counted by index. */
  countOfProvider(now: string, provider: string): Promise<number>;
  /** Applies the patch and returns the new record, or null if the id is unknown. */
  updateSandbox(id: string, patch: Partial<Omit<SandboxRecord, 'id'>>): Promise<SandboxRecord | null>;
  getSandbox(id: string): Promise<SandboxRecord | null>;
  /** Sorted by created_at, then id. */
  listSandboxes(filter?: SandboxFilter): Promise<SandboxRecord[]>;
  /** Every sandbox started from fork image `fork` (any state; at most the forks of one request), oldest first. */
  sandboxesOfFork(fork: string): Promise<SandboxRecord[]>;
}

export interface TemplateStore {
  /** Throws SbxError `conflict` when the name exists. */
  createTemplate(rec: TemplateRecord): Promise<void>;
  getTemplate(name: string): Promise<TemplateRecord | null>;
  /** Sorted by name. */
  listTemplates(): Promise<TemplateRecord[]>;
  /** Replaces every field but name and created_at; null if unknown. */
  updateTemplate(name: string, rec: Omit<TemplateRecord, 'name' | 'created_at'>): Promise<TemplateRecord | null>;
  deleteTemplate(name: string): Promise<boolean>;
}

export interface QuotaStore {
  /** Insert or update; keeps created_at of an existing row. Returns the stored row. */
  upsertQuota(rec: Omit<QuotaRecord, 'created_at'> & { created_at?: string }): Promise<QuotaRecord>;
  getQuota(ownerId: string): Promise<QuotaRecord | null>;
  /** Sorted by owner_id. */
  listQuotas(): Promise<QuotaRecord[]>;
  deleteQuota(ownerId: string): Promise<boolean>;
}

export interface WorkerStore {
  /** Insert or update; keeps created_at of an existing row. */
  upsertWorker(rec: Omit<WorkerRecord, 'created_at'> & { created_at?: string }): Promise<WorkerRecord>;
  getWorker(id: string): Promise<WorkerRecord | null>;
  /** Sorted by id. */
  listWorkers(): Promise<WorkerRecord[]>;
  deleteWorker(id: string): Promise<boolean>;
}

export interface LeaseStore {
  /**
   * Atomic (spec 3.3): succeeds when no lease exists, the lease expired at `now`, or the same
   * holder renews; generation increments on every success. Null when another holder owns an
   * unexpired lease.
   */
  acquireLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseRecord | null>;
  /** Only the current holder, only before expiry; generation increments. */
  renewLease(resourceId: string, holderId: string, ttlMs: number, now: Date): Promise<LeaseResult>;
  /** Only the current holder. */
  releaseLease(resourceId: string, holderId: string): Promise<boolean>;
  getLease(resourceId: string): Promise<LeaseRecord | null>;
  /** Sorted by resource_id. */
  listLeases(): Promise<LeaseRecord[]>;
}

/** A spawn's idempotency key (DESIGN.md §10). */
export interface IdempotencyRecord {
  /** The owner the key belongs to; '' when the spawn has none. */
  owner_key: string;
  key: string;
  /** Hash of the request the key was first used with. */
  request_hash: string;
  /** The sandbox it made; null while the first request is still spawning. */
  sandbox_id: string | null;
  created_at: string;
}

export interface IdempotencyStore {
  /** Stores the key unless (owner_key, key) exists; true when this call stored it. */
  claimIdempotency(rec: Omit<IdempotencyRecord, 'sandbox_id'>): Promise<boolean>;
  getIdempotency(ownerKey: string, key: string): Promise<IdempotencyRecord | null>;
  /** Records the sandbox of the claim made at `created_at`. */
  completeIdempotency(ownerKey: string, key: string, createdAt: string, sandboxId: string): Promise<void>;
  /**
   * Deletes the claim made at `created_at` (a failed first spawn, or an expired or abandoned key);
   * `pendingOnly` keeps one that has its sandbox. True when a row was deleted.
   */
  dropIdempotency(ownerKey: string, key: string, createdAt: string, pendingOnly: boolean): Promise<boolean>;
  /** Deletes keys created before `before`; returns how many. */
  pruneIdempotency(before: string): Promise<number>;
}

/** A snapshot of a sandbox's filesystem (DESIGN.md §10): kept until deleted. */
export interface SnapshotRecord {
  name: string;
  provider: string;
  /** The provider's reference to it (docker: `sbx-snapshot/<name>:latest`). */
  image: string;
  /** A microVM kernel; null for container and directory snapshots. */
  kernel: string | null;
  size_bytes: number;
  created_at: string;
  /** Owner of the sandbox it was taken from (null: none). */
  owner_id: string | null;
  sandbox_id: string;
  /** Worker whose provider holds it (`local` in single-node mode). */
  worker_id: string;
}

export interface SnapshotStore {
  /** Throws SbxError `conflict` when the name exists. */
  insertSnapshot(rec: SnapshotRecord): Promise<void>;
  getSnapshot(name: string): Promise<SnapshotRecord | null>;
  /** Sorted by name. */
  listSnapshots(): Promise<SnapshotRecord[]>;
  deleteSnapshot(name: string): Promise<boolean>;
}

/** A named volume (DESIGN.md §10): data that outlives sandboxes, kept until deleted. */
export interface VolumeRecord {
  name: string;
  provider: string;
  created_at: string;
  owner_id: string | null;
  /** The worker whose provider holds it (DESIGN.md §10); absent or null: this node's own. */
  worker_id?: string | null;
}

export interface VolumeStore {
  /** Throws SbxError `conflict` when the name exists. */
  insertVolume(rec: VolumeRecord): Promise<void>;
  getVolume(name: string): Promise<VolumeRecord | null>;
  /** Sorted by name. */
  listVolumes(): Promise<VolumeRecord[]>;
  deleteVolume(name: string): Promise<boolean>;
  /** Ids of sandboxes not yet destroyed that mount the volume, sorted. */
  sandboxesMounting(name: string): Promise<string[]>;
}

export interface AuditStore {
  insertAudit(rec: AuditRecord): Promise<void>;
  /** Newest first. */
  listAudit(filter?: AuditFilter): Promise<AuditRecord[]>;
  /** Deletes records created before `before`; returns how many. */
  pruneAudit(before: Date): Promise<number>;
}

/**
 * Persistence: the intersection of the role interfaces above, so a service can depend on only
 * the roles it uses. SQLite and PostgreSQL implement it once (src/adapters/stores/sql) and pass
 * one contract suite (test/contract/store.contract.ts). Lists are deterministically sorted.
 */
export type Store = StoreLifecycle &
  MetaStore &
  SandboxStore &
  TemplateStore &
  QuotaStore &
  WorkerStore &
  LeaseStore &
  AuditStore &
  IdempotencyStore &
  ProcessStore &
  WarmStore &
  PoolUidStore &
  SnapshotStore &
  VolumeStore &
  SecretStore;

// ---------------------------------------------------------------- provider (provider-port.ts)

export * from './provider-port.js';
export * from './replica-port.js';
export * from './process-port.js';
export * from './warm-port.js';
export * from './pool-port.js';
export * from './secrets/store-port.js';
