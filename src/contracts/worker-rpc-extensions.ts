/**
 * The worker RPC's sbx extensions beyond the spec's methods: `worker.status_batch` (DESIGN §7
 * reconciliation), `worker.fork` and `worker.fork_delete`, `worker.pause` and `worker.resume`,
 * `worker.file_watch` (DESIGN §16). Re-exported by worker-rpc.ts.
 */
import { Type, type Static } from '@sinclair/typebox';
import { CatalogName, Path, RpcTarget, Target } from './worker-rpc-target.js';

/** Most runtimes one `worker.status_batch` names; a longer list travels in several calls. */
export const RPC_STATUS_BATCH = 1000;
/**
 * `worker.status_batch` (DESIGN §7 reconciliation): `worker.status` of many runtimes in one call —
 * each judged exactly as `worker.status` judges it — so one call per worker per page covers its
 * sandboxes. A worker without it answers 501 `not_implemented` (unknown method) and is asked one
 * sandbox at a time.
 */
export const StatusBatchParams = Type.Object({ sandboxes: Type.Array(RpcTarget, { minItems: 1, maxItems: RPC_STATUS_BATCH }) });
export type StatusBatchParams = Static<typeof StatusBatchParams>;
/** One status per named runtime, in the order asked; `error` when its provider failed or is not run here. */
export const StatusBatchResult = Type.Object({
  statuses: Type.Array(
    Type.Object({
      sandbox_id: Type.String(),
      state: Type.Union([Type.Literal('running'), Type.Literal('paused'), Type.Literal('destroyed'), Type.Literal('error')]),
      error: Type.Optional(Type.String()),
    }),
  ),
});
export type StatusBatchResult = Static<typeof StatusBatchResult>;

/** `worker.file_watch` (DESIGN §16): the changes of a directory, one envelope each. */
export const FileWatchParams = Type.Object({ ...Target, path: Path, recursive: Type.Boolean() });

/** Fork (DESIGN §16): the copy is the worker's provider's, under the parent's lease; its forks are spawns there. */
export const ForkParams = Type.Object({ ...Target, fork: CatalogName });
export const ForkResultRpc = Type.Object({ image: Type.String() });
export type ForkResultRpc = Static<typeof ForkResultRpc>;
export const ForkDeleteParams = Type.Object({ provider: Target.provider, fork: CatalogName });

/** `worker.pause` and `worker.resume` (DESIGN §16): the runtime's provider freezes or thaws it. */
export const PauseParams = RpcTarget;
