/**
 * The worker RPC (spec 4.11, DESIGN.md §7): `POST {rpc_url}/rpc` with a request envelope, answered
 * by a response envelope whose HTTP status gives the class. One source for the worker's validation,
 * the control plane's client and their types. Binary payloads (file content, exec output and
 * stdin) travel base64; snake_case throughout.
 */
import { Type, type Static } from '@sinclair/typebox';
import { FileInfo } from './files.js';
import { CatalogName, Path, RpcTarget, Target } from './worker-rpc-target.js';
import { FileWatchParams, ForkDeleteParams, ForkParams, PauseParams, StatusBatchParams } from './worker-rpc-extensions.js';

export * from './worker-rpc-extensions.js';
export { RpcTarget } from './worker-rpc-target.js';

/** Largest file window in one `file_read`/`file_write` call (decoded bytes). */
export const RPC_FILE_WINDOW_BYTES = 4 * 1024 * 1024;
/** Header asking `worker.exec_stream` for NDJSON envelopes, flushed per chunk. */
export const RPC_STREAM_HEADER = 'x-worker-stream';
/** The RPC path under the worker's `rpc_url` (unless the URL already ends in it). */
export const RPC_PATH = '/rpc';
/** Interactive exec of a remote sandbox: the API's WebSocket exec messages, worker credentials. */
export const RPC_EXEC_WS_PATH = '/rpc/exec/ws';

export const RpcLease = Type.Object({
  resource_id: Type.String({ minLength: 1 }),
  holder_id: Type.String({ minLength: 1 }),
  generation: Type.Integer({ minimum: 0 }),
  expires_at: Type.String({ minLength: 1 }),
});
export type RpcLease = Static<typeof RpcLease>;

export const RPC_METHODS = [
  'worker.spawn',
  'worker.destroy',
  'worker.status',
  'worker.status_batch',
  'worker.exec',
  'worker.exec_stream',
  'worker.file_write',
  'worker.file_read',
  'worker.file_list',
  'worker.file_delete',
  'worker.file_move',
  'worker.file_chmod',
  'worker.file_stat',
  'worker.file_glob',
  'worker.file_watch',
  'worker.logs',
  'worker.renew_lease',
  'worker.shutdown',
  'worker.snapshot',
  'worker.snapshot_delete',
  'worker.volume_create',
  'worker.volume_delete',
  'worker.volume_sizes',
  'worker.egress_update',
  'worker.fork',
  'worker.fork_delete',
  'worker.pause',
  'worker.resume',
] as const;
export type RpcMethod = (typeof RPC_METHODS)[number];

/**
 * The lease each method carries (DESIGN.md §7 "Fencing"): `required` (spec 4.11: spawn, destroy,
 * renew_lease, and egress_update like a spawn), `optional` for the other sandbox-scoped calls that
 * change something (the spec marks them "lease: no", so a call without one is served; a stale one
 * never), `none` for reads and for calls that name no sandbox (volumes, snapshot_delete, shutdown).
 * The worker's RPC server applies it to every method in one place (core/worker/fencing.ts).
 */
export const RPC_LEASE_POLICY: Record<RpcMethod, 'required' | 'optional' | 'none'> = {
  'worker.spawn': 'required',
  'worker.destroy': 'required',
  'worker.renew_lease': 'required',
  'worker.egress_update': 'required',
  // DESIGN §16: a fork freezes and copies the parent, under the parent's lease.
  'worker.fork': 'required',
  // Pause and resume (DESIGN.md §16) change the runtime: leased like a spawn.
  'worker.pause': 'required',
  'worker.resume': 'required',
  'worker.exec': 'optional',
  'worker.exec_stream': 'optional',
  'worker.file_write': 'optional',
  'worker.file_delete': 'optional',
  'worker.file_move': 'optional',
  'worker.file_chmod': 'optional',
  'worker.snapshot': 'optional',
  'worker.status': 'none',
  'worker.status_batch': 'none',
  'worker.file_read': 'none',
  'worker.file_list': 'none',
  'worker.file_stat': 'none',
  'worker.file_glob': 'none',
  'worker.file_watch': 'none',
  'worker.logs': 'none',
  'worker.shutdown': 'none',
  'worker.snapshot_delete': 'none',
  'worker.volume_create': 'none',
  'worker.volume_delete': 'none',
  'worker.volume_sizes': 'none',
  'worker.fork_delete': 'none',
};

/** The resource a call's lease must name: `resource_id` of renew_lease, else the params' `sandbox_id`. */
export function rpcLeaseResource(method: RpcMethod, params: Record<string, unknown>): string | null {
  const id = method === 'worker.renew_lease' ? params.resource_id : params.sandbox_id;
  return typeof id === 'string' ? id : null;
}

/** The interactive exec's lease (JSON of RpcLease): its WebSocket upgrade has no envelope. */
export const RPC_LEASE_HEADER = 'x-worker-lease';

/** The worker scope each method needs (DESIGN.md §7). */
export const RPC_SCOPE: Record<RpcMethod, string> = {
  'worker.spawn': 'worker:spawn',
  'worker.destroy': 'worker:destroy',
  'worker.status': 'worker:status',
  'worker.status_batch': 'worker:status',
  'worker.shutdown': 'worker:status',
  'worker.exec': 'worker:exec',
  'worker.exec_stream': 'worker:exec',
  'worker.file_write': 'worker:files',
  'worker.file_read': 'worker:files',
  'worker.file_list': 'worker:files',
  'worker.file_delete': 'worker:files',
  'worker.file_move': 'worker:files',
  'worker.file_chmod': 'worker:files',
  'worker.file_stat': 'worker:files',
  'worker.file_glob': 'worker:files',
  // File watch (DESIGN §16): NDJSON envelopes as the changes happen, like exec_stream's.
  'worker.file_watch': 'worker:files',
  'worker.logs': 'worker:logs',
  'worker.renew_lease': 'worker:lease',
  // Snapshots and volumes (DESIGN §10) are made and removed like sandboxes.
  'worker.snapshot': 'worker:spawn',
  'worker.snapshot_delete': 'worker:destroy',
  'worker.volume_create': 'worker:spawn',
  'worker.volume_delete': 'worker:destroy',
  'worker.volume_sizes': 'worker:status',
  // A PUT of a filtered sandbox's egress lists (DESIGN §10), leased like a spawn.
  'worker.egress_update': 'worker:spawn',
  // A fork's copy is made like a spawn, and removed like a snapshot (DESIGN §16).
  'worker.fork': 'worker:spawn',
  'worker.fork_delete': 'worker:destroy',
  'worker.pause': 'worker:spawn',
  'worker.resume': 'worker:spawn',
};

/** Request envelope. `params` is checked per method after the envelope itself. */
export const RpcRequest = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 128 }),
  method: Type.String({ minLength: 1, maxLength: 64 }),
  worker_id: Type.String({ minLength: 1, maxLength: 128 }),
  lease: Type.Optional(RpcLease),
  params: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type RpcRequest = Static<typeof RpcRequest>;

export const RpcError = Type.Object({ code: Type.String(), message: Type.String() });
export type RpcError = Static<typeof RpcError>;

/** Response envelope: always this JSON, whatever the status. */
export const RpcResponse = Type.Object({
  id: Type.String(),
  worker_id: Type.String(),
  result: Type.Optional(Type.Unknown()),
  error: Type.Optional(RpcError),
});
export type RpcResponse = Static<typeof RpcResponse>;

/** Egress lists of a filtered sandbox (DESIGN §10): the API's limits, rules parsed again by the worker. */
export const RpcEgressLists = Type.Object(
  {
    allow: Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { maxItems: 64 }),
    deny: Type.Array(Type.String({ minLength: 1, maxLength: 512 }), { maxItems: 64 }),
  },
  { additionalProperties: false },
);
export type RpcEgressLists = Static<typeof RpcEgressLists>;

/**
 * The spec's params: `sandbox_id` plus the spawn fields. Everything beyond `sandbox_id` is optional
 * (DESIGN §7) and takes the worker's own defaults: its default provider, `defaults.image`,
 * `memory_mb`, `vcpus` and `ttl`, no metadata, `owner_id` null, the provider's network.
 */
export const SpawnParams = Type.Object({
  sandbox_id: Type.String({ minLength: 1, maxLength: 128 }),
  provider: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  image: Type.Optional(Type.String({ minLength: 1 })),
  memory_mb: Type.Optional(Type.Integer({ minimum: 1 })),
  vcpus: Type.Optional(Type.Integer({ minimum: 1 })),
  ttl: Type.Optional(Type.String()),
  metadata: Type.Optional(Type.Record(Type.String(), Type.String())),
  owner_id: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  /** With the control plane's `server.preview_auth`: the token the worker's own preview host requires. */
  preview_token: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  /** DESIGN §10: `none`, `bridge` or `filtered` (with `egress`); absent: the worker provider's default. */
  network: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('bridge'), Type.Literal('filtered')])),
  /** DESIGN §10: the lists of a `filtered` sandbox (checked again by the worker). */
  egress: Type.Optional(RpcEgressLists),
  /** DESIGN §10: the snapshot it starts from (`image` is then the snapshot's), made on this worker. */
  snapshot: Type.Optional(CatalogName),
  /** DESIGN §16: the fork image it starts from (`image` is then the fork image's), made on this worker by `worker.fork`. */
  fork: Type.Optional(CatalogName),
  /** DESIGN §10: volumes of this worker to mount read-write. */
  volumes: Type.Optional(
    Type.Array(
      Type.Object({ name: CatalogName, mount_path: Type.String({ minLength: 1, maxLength: 4096 }) }, { additionalProperties: false }),
      { maxItems: 16 },
    ),
  ),
});
export type SpawnParams = Static<typeof SpawnParams>;
export const SpawnResult = Type.Object({
  sandbox_id: Type.String(),
  runtime_id: Type.String(),
  state: Type.Literal('running'),
  provider: Type.String(),
  worker_id: Type.String(),
  network: Type.Optional(Type.String()),
});
export type SpawnResult = Static<typeof SpawnResult>;

export const DestroyParams = RpcTarget;
export const StatusParams = RpcTarget;
export const StatusResult = Type.Object({
  sandbox_id: Type.String(),
  state: Type.Union([Type.Literal('running'), Type.Literal('paused'), Type.Literal('destroyed'), Type.Literal('error')]),
  provider: Type.String(),
  worker_id: Type.String(),
  error: Type.Optional(Type.String()),
});
export type StatusResult = Static<typeof StatusResult>;

/**
 * `worker.exec` and `worker.exec_stream`. `timeout` is a duration string ('' or absent: none; the
 * control plane enforces its own deadline and closes the call). `stdin` (base64) is fed then EOF.
 */
export const ExecParams = Type.Object({
  ...Target,
  command: Type.String({ minLength: 1 }),
  args: Type.Array(Type.String()),
  mode: Type.Union([Type.Literal('shell'), Type.Literal('argv')]),
  env: Type.Record(Type.String(), Type.String()),
  workdir: Type.Optional(Type.String()),
  timeout: Type.Optional(Type.String()),
  stdin: Type.Optional(Type.String({ description: 'base64' })),
  binary: Type.Optional(Type.Boolean()),
});
export type ExecParams = Static<typeof ExecParams>;
/** Buffered exec result; stdout/stderr base64 (byte-exact), `duration` a duration string. */
export const ExecResultRpc = Type.Object({
  sandbox_id: Type.String(),
  exit_code: Type.Integer(),
  stdout: Type.String(),
  stderr: Type.String(),
  duration: Type.String(),
  encoding: Type.Literal('base64'),
  /** Output past the worker's `max_exec_output_mb` per stream was dropped (a note says how much). */
  truncated: Type.Optional(Type.Boolean()),
});
export type ExecResultRpc = Static<typeof ExecResultRpc>;
/** One NDJSON `result` of `worker.exec_stream`: output (base64) or the final exit. */
export const ExecStreamItem = Type.Union([
  Type.Object({
    stream: Type.Union([Type.Literal('stdout'), Type.Literal('stderr')]),
    data: Type.String(),
    encoding: Type.Literal('base64'),
  }),
  Type.Object({ stream: Type.Literal('exit'), exit_code: Type.Union([Type.Integer(), Type.Null()]), duration: Type.String() }),
]);
export type ExecStreamItem = Static<typeof ExecStreamItem>;

/**
 * `worker.file_write`: one window of at most RPC_FILE_WINDOW_BYTES. `offset` 0 with `truncate`
 * starts an upload (`upload_id` names it); windows follow in order; `final` renames the staged
 * bytes over `path` (a write with neither offset nor upload_id is a whole file in one window).
 */
export const FileWriteParams = Type.Object({
  ...Target,
  path: Path,
  content: Type.String({ description: 'base64' }),
  mode: Type.Optional(Type.Integer({ minimum: 0, maximum: 0o7777 })),
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
  truncate: Type.Optional(Type.Boolean()),
  upload_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' })),
  final: Type.Optional(Type.Boolean()),
});
export type FileWriteParams = Static<typeof FileWriteParams>;
export const FileReadParams = Type.Object({
  ...Target,
  path: Path,
  offset: Type.Optional(Type.Integer({ minimum: 0 })),
  length: Type.Optional(Type.Integer({ minimum: 1, maximum: RPC_FILE_WINDOW_BYTES })),
  /** Refuse (payload_too_large) before reading when the file is larger. */
  max_bytes: Type.Optional(Type.Integer({ minimum: 0 })),
});
export type FileReadParams = Static<typeof FileReadParams>;
export const FileReadResult = Type.Object({ content: Type.String(), size: Type.Integer(), eof: Type.Boolean() });
export type FileReadResult = Static<typeof FileReadResult>;
export const FileListParams = Type.Object({ ...Target, path: Path });
export const FileListResult = Type.Object({ files: Type.Array(FileInfo) });
export const FileDeleteParams = Type.Object({ ...Target, path: Path, recursive: Type.Boolean() });
export const FileMoveParams = Type.Object({ ...Target, old_path: Path, new_path: Path });
export const FileChmodParams = Type.Object({ ...Target, path: Path, mode: Type.Integer({ minimum: 0, maximum: 0o7777 }) });
export const FileStatParams = Type.Object({ ...Target, path: Path });
export const FileStatResult = Type.Object({ file: FileInfo });
export const FileGlobParams = Type.Object({ ...Target, pattern: Type.String({ minLength: 1, maxLength: 4096 }) });
export const FileGlobResult = Type.Object({ matches: Type.Array(Type.String()) });
/** `worker.file_watch` (DESIGN §16): always streamed; each NDJSON `result` is one change `{type, path?, old_path?}`. */
export const LogsParams = Type.Object({
  ...Target,
  lines: Type.Integer({ minimum: 0, maximum: 100_000 }),
  after: Type.Optional(Type.Integer({ minimum: 0 })),
});
export const LogsResult = Type.Object({ lines: Type.Array(Type.String()), cursor: Type.Optional(Type.Integer()) });
export const RenewLeaseParams = Type.Object({ resource_id: Type.String({ minLength: 1, maxLength: 128 }) });
export const RenewLeaseResult = Type.Object({ lease: RpcLease });
export const ShutdownParams = Type.Object({ mode: Type.Literal('drain') });
export const ShutdownResult = Type.Object({ status: Type.Literal('draining') });

/** Params schema of each method, for the worker's validation (400 on mismatch). */
export const SnapshotParams = Type.Object({ ...Target, name: CatalogName });
export const SnapshotResultRpc = Type.Object({
  image: Type.String(),
  kernel: Type.Union([Type.String(), Type.Null()]),
  size_bytes: Type.Integer({ minimum: 0 }),
});
export type SnapshotResultRpc = Static<typeof SnapshotResultRpc>;
export const SnapshotDeleteParams = Type.Object({
  provider: Target.provider,
  name: CatalogName,
  image: Type.String({ minLength: 1, maxLength: 512 }),
});
/** `worker.fork` (DESIGN §16): copy the runtime's filesystem as fork image `fork`; its forks are `worker.spawn`s with `fork`. */
export const VolumeParams = Type.Object({ provider: Target.provider, name: CatalogName });
export const VolumeSizesParams = Type.Object({ provider: Target.provider, names: Type.Array(CatalogName, { maxItems: 1000 }) });
/** `worker.egress_update`: the new lists of a filtered sandbox this worker runs (a PUT …/egress). */
export const EgressUpdateParams = Type.Object({ ...Target, egress: RpcEgressLists });
export const VolumeSizesResult = Type.Object({
  sizes: Type.Record(Type.String(), Type.Union([Type.Integer({ minimum: 0 }), Type.Null()])),
});

export const RPC_PARAMS = {
  'worker.spawn': SpawnParams,
  'worker.destroy': DestroyParams,
  'worker.status': StatusParams,
  'worker.status_batch': StatusBatchParams,
  'worker.exec': ExecParams,
  'worker.exec_stream': ExecParams,
  'worker.file_write': FileWriteParams,
  'worker.file_read': FileReadParams,
  'worker.file_list': FileListParams,
  'worker.file_delete': FileDeleteParams,
  'worker.file_move': FileMoveParams,
  'worker.file_chmod': FileChmodParams,
  'worker.file_stat': FileStatParams,
  'worker.file_glob': FileGlobParams,
  'worker.file_watch': FileWatchParams,
  'worker.logs': LogsParams,
  'worker.renew_lease': RenewLeaseParams,
  'worker.shutdown': ShutdownParams,
  'worker.snapshot': SnapshotParams,
  'worker.snapshot_delete': SnapshotDeleteParams,
  'worker.volume_create': VolumeParams,
  'worker.volume_delete': VolumeParams,
  'worker.volume_sizes': VolumeSizesParams,
  'worker.egress_update': EgressUpdateParams,
  'worker.fork': ForkParams,
  'worker.fork_delete': ForkDeleteParams,
  'worker.pause': PauseParams,
  'worker.resume': PauseParams,
} as const;

/** HTTP status of each RPC error code (DESIGN.md §7): `timeout` is 504 here, not the API's 408. */
export const RPC_STATUS_BY_CODE: Record<string, number> = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  provider_error: 500,
  internal: 500,
  not_implemented: 501,
  unavailable: 503,
  timeout: 504,
};

/** The WebSocket exec query (`GET /rpc/exec/ws?sandbox_id=&provider=&runtime_id=`). */
export const ExecWsQuery = RpcTarget;
