/**
 * The RemoteWorkers port: how core reaches runtimes on other machines (DESIGN.md §7). Its adapter
 * (transports/worker-rpc/remote-provider.ts) speaks the worker RPC; core sees each remote sandbox
 * as an ordinary Provider bound to that sandbox, so lifecycle, exec, files and logs have no
 * local/remote branches.
 */
import type { LeaseRecord, Provider, RuntimeStatus, WorkerRecord } from '../ports/index.js';

/** The sandbox a bound remote provider serves. */
export interface RemoteTarget {
  sandbox_id: string;
  /** The provider name on the worker (docker, proot, mock, …). */
  provider: string;
  /** The sandbox's TTL as a duration string, sent in `worker.spawn`. */
  ttl?: string;
  /** The lease every call that changes the sandbox presents (current value read at call time; DESIGN §7 "Fencing"). */
  lease(): Promise<LeaseRecord | null>;
  /** The worker's answer to spawn; set once known so later calls name the runtime. */
  runtime_id?: string | null;
}

/** A runtime a remote worker runs for a sandbox. */
export interface RemoteRuntime {
  sandbox_id: string;
  provider: string;
  runtime_id: string;
}

export interface RemoteWorkers {
  /**
   * Why the control plane cannot call this worker (no `rpc_url`, no credential for it), or null
   * when it can. Placement answers 503 `remote_worker_rpc_unavailable` with this reason.
   */
  unreachableReason(worker: WorkerRecord): string | null;
  /**
   * A Provider whose every call goes to `worker` for `target`: spawn → `worker.spawn` (with the
   * lease), destroy → `worker.destroy` (with the lease; unknown runtime = destroyed), status →
   * `worker.status` (`destroyed` → missing, `error` → stopped), exec → `worker.exec_stream` NDJSON
   * (or the RPC WebSocket when stdin is live, a terminal is asked for, or controls are given),
   * files in ≤ 4 MiB windows, logs → `worker.logs`. A worker that cannot be reached → SbxError
   * `unavailable`; its typed errors pass through with their codes; never backend text.
   */
  provider(worker: WorkerRecord, target: RemoteTarget): Provider;
  /**
   * `worker.status` of many runtimes of one worker in as few calls as the wire allows
   * (`worker.status_batch`, paged): each sandbox id to its status (`destroyed` → missing, `error` →
   * stopped). Null when the worker does not have the method (an older worker: 501 unknown method),
   * so the caller asks one sandbox at a time (as it does when the adapter has no such call).
   * Unreachable → SbxError `unavailable`.
   */
  statusBatch?(
    worker: WorkerRecord,
    targets: ReadonlyArray<RemoteRuntime>,
    signal?: AbortSignal,
  ): Promise<Map<string, RuntimeStatus> | null>;
  /** `worker.renew_lease` with the renewed lease; the worker records the new generation. */
  renewLease(worker: WorkerRecord, lease: LeaseRecord, signal?: AbortSignal): Promise<void>;
  /** `worker.shutdown {mode: "drain"}`. */
  drain(worker: WorkerRecord, signal?: AbortSignal): Promise<void>;
  close?(): Promise<void>;
}
