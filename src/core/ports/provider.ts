/**
 * The Provider port: what core asks of a runtime backend (docker, proot, mock, later remote
 * workers). Every method is asynchronous and takes an AbortSignal; exec streams as an
 * AsyncIterable of events. Re-exported by ports/index.ts, the one import site for every port.
 */
import type { EgressLists } from '../network/rules.js';

export interface SpawnSpec {
  sandbox_id: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  metadata: Record<string, string>;
  owner_id: string | null;
  /** The sandbox's preview token when previews need one (a remote worker enforces it on its own preview host). */
  preview_token?: string;
  /** `none`, `bridge` or `filtered` when the spawn asked for one; absent: the provider's default. */
  network?: 'none' | 'bridge' | 'filtered';
  /** A filtered spawn's lists (canonical). A local provider's gateway reads them from the store; a worker gets them here. */
  egress?: EgressLists;
  /**
   * Start from this snapshot (DESIGN.md §10): its name; `image` is then the snapshot's image as
   * the provider's `snapshot` returned it.
   */
  snapshot?: string;
  /**
   * Start from this fork image (DESIGN.md §16): the name `forkImage` was given; `image` is then the
   * one it returned. Like a snapshot, reachable only this way.
   */
  fork?: string;
  /** Volumes to mount read-write (names of volumes made by `createVolume`; paths absolute and normalized). */
  volumes?: Array<{ name: string; mount_path: string }>;
}

/** A snapshot or volume a provider holds: its sbx name, its image (snapshots) and when it was made (ISO). */
export interface CatalogItem {
  name: string;
  image?: string;
  created_at: string | null;
}

/** What a provider's snapshot produced. */
export interface SnapshotResult {
  /** The provider's reference to it, shown to callers (docker: `sbx-snapshot/<name>:latest`). No host paths. */
  image: string;
  size_bytes: number;
  /** A microVM kernel, when the snapshot has one. */
  kernel?: string | null;
}

/** What a provider's fork copy produced: the image its forks start from (docker: `sbx-fork/<fork>:latest`). */
export interface ForkImage {
  image: string;
}

export interface SpawnResult {
  runtime_id: string;
  /** The network the runtime got, when the provider knows it. */
  network?: string;
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
  /** Run as this uid/gid (pool workspaces, DESIGN §8); absent = the runtime's own user. */
  user?: { uid: number; gid: number };
  /**
   * The caller collects the whole output before it answers (a buffered exec): a backend with a
   * one-shot call for that (custom HTTP's `POST /exec` without `stream`) may use it. Others ignore it.
   */
  buffered?: true;
}

/** One tenant's workspace in a shared runtime (pool mode, DESIGN §8). */
export interface WorkspaceSpec {
  /** Directory name under /workspace: the logical sandbox's id. */
  name: string;
  /** The tenant's own uid and gid (10000 + slot). */
  uid: number;
  gid: number;
}

/**
 * A workspace of a shared runtime seen as a runtime of its own: paths are the tenant's
 * (`/a.txt` is `/workspace/<name>/a.txt`) both ways and can never reach outside it, exec starts
 * there. Each provider gives it the strongest isolation it can (see `isolation`).
 */
export interface WorkspaceOps {
  /** How tenants are kept apart: `uid` (own uid, mode 0700) or `paths` (API paths confined; exec shares the runtime's user). */
  readonly isolation: 'uid' | 'paths';
  /** Creates the workspace (owned by the tenant, mode 0700). Idempotent. */
  prepare(signal?: AbortSignal): Promise<void>;
  /** Deletes the workspace and everything in it. Idempotent. */
  remove(signal?: AbortSignal): Promise<void>;
  exec(spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent>;
  writeFile(path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void>;
  /** As Provider.writeFileStream. */
  writeFileStream?(path: string, body: AsyncIterable<Uint8Array>, mode: () => number | undefined, signal?: AbortSignal): Promise<void>;
  readFile(path: string, signal?: AbortSignal, maxBytes?: number): Promise<Uint8Array>;
  openFile?(path: string, signal?: AbortSignal, maxBytes?: number): Promise<OpenedFile>;
  deleteFile(path: string, recursive: boolean, signal?: AbortSignal): Promise<void>;
  listFiles(path: string, signal?: AbortSignal): Promise<FileInfo[]>;
  moveFile(oldPath: string, newPath: string, signal?: AbortSignal): Promise<void>;
  chmod(path: string, mode: number, signal?: AbortSignal): Promise<void>;
  stat(path: string, signal?: AbortSignal): Promise<FileInfo>;
  glob(pattern: string, signal?: AbortSignal): Promise<string[]>;
  /**
   * Whether a preview connection to `host:port` (the address the runtime's preview upstream
   * names) reaches only this workspace's own listener (DESIGN.md §8): docker by the listening
   * socket's uid, mock and proot by its process's PID namespace. Absent: no pool preview at all.
   */
  listenerOwned?(port: number, host: string, signal?: AbortSignal): Promise<boolean>;
}

/** Signals a caller may send to a running command. */
export const EXEC_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGKILL', 'SIGHUP', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;
export type ExecSignal = (typeof EXEC_SIGNALS)[number];

/**
 * A live request to a running command. `signal` goes to every process of the command (its exit
 * code then reports it, e.g. 130 for SIGINT), except SIGINT and SIGQUIT in a terminal, which act
 * as ^C and ^\ do (the terminal's foreground job gets them); `resize` is ignored without a terminal.
 */
export type ExecControl = ExecResize | { type: 'signal'; signal: ExecSignal };

/** A terminal resize; the provider calls `applied` once the terminal has that size (or the resize failed). */
export interface ExecResize {
  type: 'resize';
  cols: number;
  rows: number;
  applied?: () => void;
}

/**
 * What an exec yields: output chunks in order, then exactly one `exit` as the last item — except a
 * backend that reports no exit status (a custom HTTP backend written for the anchor streams output
 * only, DESIGN §12): its iteration just ends, and the exit code is null all the way out. The
 * discriminator is `stream` all the way out — core's ExecItem and the API's NDJSON lines use it too.
 * When the signal aborts, the provider kills the command's whole process tree and ends the
 * iteration promptly (an `exit` with a non-zero code, or by returning); core decides whether it
 * was a deadline or a cancel.
 */
export type ExecEvent = { stream: 'stdout' | 'stderr'; data: Uint8Array } | { stream: 'exit'; exit_code: number };

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

/** What changed under a watched directory (DESIGN §16): the kinds a watch reports. */
export const WATCH_EVENT_TYPES = ['create', 'write', 'remove', 'rename', 'chmod'] as const;
export type WatchEventType = (typeof WATCH_EVENT_TYPES)[number];

/**
 * One change a watch reports, in order: `path` absolute inside the sandbox (the runtime's paths;
 * never outside it), `old_path` on a rename (one event for both names). `overflow`: the watch could
 * not keep up (too many directories, the kernel's queue overflowed, a consumer too far behind) and
 * ends after it. `ts` is set by core when it passes the event on (ISO time of day).
 */
export type WatchEvent = { type: WatchEventType; path: string; old_path?: string; ts?: string } | { type: 'overflow'; ts?: string };

export interface ProviderHealth {
  healthy: boolean;
  latency_ms: number;
  error?: string;
  runtime_count?: number;
  /** A healthy provider's caveat an operator should see (e.g. commands not isolated from host processes). */
  warning?: string;
}

/** `paused`: frozen by `pause` (DESIGN.md §16), alive: memory and processes kept, nothing runs until `resume`. */
export type RuntimeStatus = 'running' | 'paused' | 'stopped' | 'missing';

/**
 * Where a sandbox's TCP port is reached for a live preview (DESIGN.md §9): an address, or (for a
 * remote-owned sandbox) the owning worker's RPC listener with a path prefix, the worker's
 * credentials as headers and the TLS material of the RPC client.
 */
export interface PreviewUpstream {
  host: string;
  port: number;
  /** Prepended to the request path (`/rpc/preview/<sandbox_id>/<port>`); absent = the path as is. */
  path_prefix?: string;
  /** Added to the forwarded request (worker credentials); never shown to the sandbox's visitors. */
  headers?: Record<string, string>;
  /**
   * The address is shared by the tenants of a pool runtime, and who may reach it was judged for
   * this request alone (DESIGN.md §8): never reused for another request.
   */
  shared?: boolean;
  /** TLS to the upstream (mTLS to a worker); absent = plain TCP. */
  tls?: { ca?: Uint8Array; cert?: Uint8Array; key?: Uint8Array; servername?: string; rejectUnauthorized: boolean };
}

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
/**
 * Egress enforcement (DESIGN.md §10): present on a provider that can run `filtered` sandboxes on
 * this node. The rules themselves live in the store; the provider's gateway reads them.
 */
export interface ProviderEgress {
  /** Null when filtered sandboxes are enforced here now; else why not (the spawn answers 501 with it). */
  unavailable(): string | null;
  /** A sandbox's lists changed (PUT): close its connections and tunnels the new lists no longer allow. */
  changed(sandboxId: string): void;
}

/** A provider whose runtimes enforce their egress rules elsewhere (a remote worker): a PUT's lists are sent there. */
export interface RemoteEgress {
  update(runtimeId: string, lists: EgressLists, signal?: AbortSignal): Promise<void>;
}

export interface Provider {
  readonly name: string;
  readonly capabilities: readonly string[];
  /** Egress enforcement for `filtered` (DESIGN.md §10); absent: the provider cannot enforce it (501). */
  readonly egress?: ProviderEgress;
  /** Present on a remote worker's provider: where a filtered sandbox's new lists go (DESIGN.md §10). */
  readonly remoteEgress?: RemoteEgress;
  /** Public, redacted settings for the provider detail (`runtime`, `network_mode`, …). */
  config(): Record<string, unknown>;
  health(signal?: AbortSignal): Promise<ProviderHealth>;

  spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult>;
  /** Idempotent: a runtime that is already gone is not an error. */
  destroy(runtimeId: string, signal?: AbortSignal): Promise<void>;
  /** Removes a runtime nobody owns (a reconciliation orphan) at once, without a graceful stop. Optional: `destroy` serves otherwise. */
  discard?(runtimeId: string, signal?: AbortSignal): Promise<void>;
  status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus>;
  /** Runtimes this provider knows of (for reconciliation). Optional. */
  listRuntimes?(signal?: AbortSignal): Promise<RuntimeInfo[]>;

  exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent>;

  writeFile(runtimeId: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void>;
  /**
   * Optional streamed write: the file's bytes as they arrive (memory stays flat however large).
   * The file appears whole only when `body` ends normally; when it throws (a bad or cut upload)
   * nothing is left, not even a partial file, and the old file stays. `mode` is read once the body
   * has ended (a JSON upload may name it after the content): as in `writeFile`.
   */
  writeFileStream?(
    runtimeId: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    mode: () => number | undefined,
    signal?: AbortSignal,
  ): Promise<void>;
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

  /**
   * Where TCP `port` inside the runtime is reached from this process, for live preview. Optional:
   * a provider without it answers previews with 501. A runtime without a network → `bad_gateway`.
   */
  previewUpstream?(runtimeId: string, port: number, signal?: AbortSignal): Promise<PreviewUpstream>;

  /**
   * Snapshots and volumes (DESIGN.md §10), optional: a provider without them answers 501.
   * `snapshot` saves the runtime's filesystem under `name` (a conflict when the provider already
   * holds one of that name); `deleteSnapshot` is idempotent. `createVolume` makes an empty named
   * volume; `deleteVolume` is idempotent and a `conflict` while a runtime uses it; `volumeSizes`
   * answers bytes per name, null where the provider cannot tell.
   */
  snapshot?(runtimeId: string, name: string, signal?: AbortSignal): Promise<SnapshotResult>;
  deleteSnapshot?(name: string, image: string, signal?: AbortSignal): Promise<void>;
  createVolume?(name: string, signal?: AbortSignal): Promise<void>;
  deleteVolume?(name: string, signal?: AbortSignal): Promise<void>;
  volumeSizes?(names: readonly string[], signal?: AbortSignal): Promise<Record<string, number | null>>;
  /**
   * The snapshots and volumes this provider holds for this installation (labelled as its), with
   * when each was made, for reconciliation. Optional.
   */
  listCatalog?(signal?: AbortSignal): Promise<{ snapshots: CatalogItem[]; volumes: CatalogItem[] }>;

  /**
   * Fork (DESIGN.md §16), optional: without it a fork answers 501. `forkImage` copies the runtime's
   * filesystem at this moment (not its processes) under `fork`, a name sbx made
   * (`[a-z0-9][a-z0-9_.-]{0,63}`); the caller holds the runtime frozen around it where it can.
   * Spawns with `SpawnSpec.fork` start from the copy; `deleteForkImage` is idempotent.
   */
  forkImage?(runtimeId: string, fork: string, signal?: AbortSignal): Promise<ForkImage>;
  deleteForkImage?(fork: string, signal?: AbortSignal): Promise<void>;
  /** This installation's fork images with when each was made, for reconciliation. Optional. */
  listForkImages?(signal?: AbortSignal): Promise<CatalogItem[]>;

  /**
   * Watches the directory `path` (DESIGN §16): resolves once the watch is in place (every change
   * after that is reported), with the changes under it as they happen, `recursive` into every
   * subdirectory (new ones too). A missing path is `not_found`, a file (or a symlink: never
   * followed) `bad_request`; symlinks found inside are reported, never followed. Ends when the
   * runtime goes or after an `overflow`; the signal's abort (or `return()`) frees the watch at once.
   * Writes are not coalesced here (core does that). Optional: without it the watch answers 501.
   */
  watch?(runtimeId: string, path: string, opts: { recursive: boolean }, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>>;

  /**
   * Pause and resume (DESIGN.md §16), optional: a provider without them answers 501. `pause`
   * freezes every process of the runtime (docker: the engine's pause; mock and proot: the cgroup
   * freezer on the sandbox's PID namespace, never SIGSTOP) and resolves once all are frozen;
   * `resume` thaws them. Both are idempotent. A provider that has them but cannot freeze on this
   * host throws `not_implemented` with the reason.
   */
  pause?(runtimeId: string, signal?: AbortSignal): Promise<void>;
  resume?(runtimeId: string, signal?: AbortSignal): Promise<void>;

  /** Pool mode (DESIGN §8): one tenant's workspace of this runtime. Optional: without it a provider cannot back a pool. */
  workspace?(runtimeId: string, ws: WorkspaceSpec): WorkspaceOps;

  /**
   * Whether `image` is already where spawns take it from (docker: the engine has it, no pull
   * needed). Optional: providers without images lack it. For `GET /providers/{name}` (doctor).
   */
  imagePresent?(image: string, signal?: AbortSignal): Promise<boolean>;

  /** Releases clients, timers. */
  close?(): Promise<void>;
}
