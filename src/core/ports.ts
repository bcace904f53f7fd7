/**
 * Ports: the interfaces core drives. Adapters (stores, providers) implement them; compose wires them.
 * Every method is asynchronous; provider methods take an AbortSignal so a cancelled request, a
 * deadline and a remote worker look the same to core.
 */

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

export type SandboxState = 'running' | 'destroyed' | 'unhealthy' | 'expired' | 'error';

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
  last_heartbeat: string;
  created_at: string;
  updated_at: string;
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
  /**
   * Ownership applied in the query: rows without a private owner (none, or a derived `key/…`,
   * `ip/…` owner) plus, when `owner_id` is a string, that owner's rows.
   */
  visible_to?: { owner_id: string | null };
  /** At most this many rows (after filtering and sorting). */
  limit?: number;
}

export type LeaseResult =
  | { ok: true; lease: LeaseRecord }
  | { ok: false; reason: 'not_found' | 'held_by_other' | 'expired' };

// ---------------------------------------------------------------- store

/** Opening, migrating and closing a store (Store.driver names the SQL dialect). */
export interface StoreLifecycle {
  readonly driver: string;
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

export interface SandboxStore {
  insertSandbox(rec: SandboxRecord): Promise<void>;
  /** Applies the patch and returns the new record, or null if the id is unknown. */
  updateSandbox(id: string, patch: Partial<Omit<SandboxRecord, 'id'>>): Promise<SandboxRecord | null>;
  getSandbox(id: string): Promise<SandboxRecord | null>;
  /** Sorted by created_at, then id. */
  listSandboxes(filter?: SandboxFilter): Promise<SandboxRecord[]>;
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
  AuditStore;

// ---------------------------------------------------------------- provider

export interface SpawnSpec {
  sandbox_id: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  metadata: Record<string, string>;
  owner_id: string | null;
}

export interface SpawnResult {
  runtime_id: string;
}

export interface ExecSpec {
  command: string;
  args: string[];
  /** `shell`: `sh -c` with command and shell-quoted args; `argv`: exec [command, ...args]. */
  mode: 'shell' | 'argv';
  env: Record<string, string>;
  /** Absolute path inside the sandbox; provider default when absent. */
  workdir?: string;
  /**
   * The command's stdin. Bytes: fed, then EOF. A stream: each chunk is written as it arrives (the
   * command may produce output before the next one comes), EOF when the iteration ends. Absent =
   * empty stdin. A provider stops pulling when the command ends and then calls `return()`.
   */
  stdin?: Uint8Array | AsyncIterable<Uint8Array>;
  /**
   * Ask for a terminal of this size (stdout and stderr then arrive merged, as `stdout`). Only
   * providers with the `tty` capability honour it; the others run the command with pipes, silently.
   */
  tty?: { cols: number; rows: number };
  /** Live requests while the command runs: terminal resize, signals. Ends with the exec. */
  controls?: AsyncIterable<ExecControl>;
}

/** Signals a caller may send to a running command. */
export const EXEC_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];

/**
 * A live request to a running command. `signal` goes to every process of the command (its exit
 * code then reports it, e.g. 130 for SIGINT), except SIGINT and SIGQUIT in a terminal, which act
 * as ^C and ^\ do (the terminal's foreground job gets them); `resize` is ignored without a terminal.
 */
export type ExecControl = { type: 'resize'; cols: number; rows: number } | { type: 'signal'; signal: ExecSignal };

/**
 * What an exec yields: output chunks in order, then exactly one `exit` as the last item.
 * When the signal aborts, the provider kills the command's whole process tree and ends the
 * iteration promptly (an `exit` with a non-zero code, or by returning); core decides whether it
 * was a deadline or a cancel.
 */
export type ExecEvent =
  | { type: 'stdout' | 'stderr'; data: Uint8Array }
  | { type: 'exit'; exit_code: number };

/** A console read: the last `lines` lines, or with `after` the first `lines` lines numbered above it. */
export interface ConsoleQuery {
  lines: number;
  after?: number;
}

/** Console lines, oldest first, and the cursor to pass as `after` next; no cursor = the provider keeps none. */
export interface ConsoleLog {
  lines: string[];
  cursor?: number;
}

export interface FileInfo {
  name: string;
  /** Absolute path inside the sandbox. */
  path: string;
  size: number;
  is_dir: boolean;
  /** ISO timestamp. */
  mod_time: string;
  /** Octal permission + special bits with a leading zero: `0644`, `0755`, `01777`. */
  mode: string;
}

export interface ProviderHealth {
  healthy: boolean;
  latency_ms: number;
  error?: string;
  runtime_count?: number;
  /** A healthy provider's caveat an operator should see (e.g. commands not isolated from host processes). */
  warning?: string;
}

export type RuntimeStatus = 'running' | 'stopped' | 'missing';

/** A file being read: its size, and its bytes as they arrive. */
export interface OpenedFile {
  size: number;
  body: AsyncIterable<Uint8Array>;
}

export interface RuntimeInfo {
  runtime_id: string;
  sandbox_id: string | null;
  installation_id: string | null;
  status: RuntimeStatus;
}

/**
 * A runtime backend. Paths handed to file methods are already validated by core (absolute,
 * normalized, no NUL); providers still confine them to the sandbox. Missing paths throw
 * SbxError `not_found`; backend failures throw `provider_error` without leaking backend text
 * that may carry secrets.
 */
export interface Provider {
  readonly name: string;
  readonly capabilities: readonly string[];
  /** Public, redacted settings for the provider detail (`runtime`, `network_mode`, …). */
  config(): Record<string, unknown>;
  health(signal?: AbortSignal): Promise<ProviderHealth>;

  spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult>;
  /** Idempotent: a runtime that is already gone is not an error. */
  destroy(runtimeId: string, signal?: AbortSignal): Promise<void>;
  status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus>;
  /** Runtimes this provider knows of (for reconciliation). Optional. */
  listRuntimes?(signal?: AbortSignal): Promise<RuntimeInfo[]>;

  exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent>;

  writeFile(runtimeId: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void>;
  /**
   * A directory is `bad_request`. A file over `maxBytes` is `payload_too_large`, refused before
   * its bytes are transferred where the backend can tell its size first.
   */
  readFile(runtimeId: string, path: string, signal?: AbortSignal, maxBytes?: number): Promise<Uint8Array>;
  /**
   * Optional streaming read, with `readFile`'s refusals before the first byte: resolves once the
   * size is known, and the body then yields exactly `size` bytes (or fails). A body that is not
   * consumed to the end must be ended with `return()` to release the backend.
   */
  openFile?(runtimeId: string, path: string, signal?: AbortSignal, maxBytes?: number): Promise<OpenedFile>;
  deleteFile(runtimeId: string, path: string, recursive: boolean, signal?: AbortSignal): Promise<void>;
  listFiles(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo[]>;
  moveFile(runtimeId: string, oldPath: string, newPath: string, signal?: AbortSignal): Promise<void>;
  chmod(runtimeId: string, path: string, mode: number, signal?: AbortSignal): Promise<void>;
  stat(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo>;
  /** Absolute paths matching the pattern (`*`, `?`, `[...]`, `**`), sorted. */
  glob(runtimeId: string, pattern: string, signal?: AbortSignal): Promise<string[]>;

  /**
   * Console lines, oldest first: the last `lines`, or with `after` the lines recorded after that
   * cursor. Each line a provider records gets the next number of a per-runtime count; `cursor`
   * is the number of the last line returned (when none is, where the next read should go on).
   */
  logs(runtimeId: string, query: ConsoleQuery, signal?: AbortSignal): Promise<ConsoleLog>;

  /** Releases clients, timers. */
  close?(): Promise<void>;
}
