/**
 * What a worker's RPC server drives: its providers, its own state, its credentials and its
 * draining flag. Built by compose/worker.ts.
 */
import type { Logger } from 'pino';
import type { WorkerCredentials } from '../../../core/auth/settings.js';
import type { WorkerIdentity } from '../../../core/auth/worker-claims.js';
import type { Clock, Provider } from '../../../core/ports/index.js';
import type { PreviewStats } from '../../shared/preview/proxy.js';
import type { WorkerState } from '../../../core/scheduler/worker-state-port.js';

export interface RpcServerDeps {
  workerId: string;
  /** The accepted credentials, read at each request (a token file may have been rotated). */
  credentials: () => WorkerCredentials;
  /** Healthy-or-not providers this worker runs, by name. */
  providers: ReadonlyMap<string, Provider>;
  /** What a `worker.spawn` that leaves them out gets (DESIGN §7): the default provider and this worker's `defaults.*`. */
  spawnDefaults: { provider: string; image: string; memory_mb: number; vcpus: number };
  state: WorkerState;
  clock: Clock;
  /** A private directory for staged uploads (never inside a sandbox). */
  stagingDir: string;
  /** True once the worker drains: spawns answer 503. */
  draining(): boolean;
  /** Enters draining (the `worker.shutdown` method). */
  drain(): void;
  log: Logger;
  /** `capacity.max_sandboxes` (its `defaults.max_sandboxes`): runtimes kept plus spawns in flight; 0 = no limit. */
  maxSandboxes?: number;
  /** `defaults.max_exec_output_mb` in bytes: what a buffered `worker.exec` keeps per stream (as a local buffered exec). */
  maxExecOutputBytes?: number;
  /** `worker.preview_domain`: host-routed previews this worker serves itself ('' = none). */
  previewDomain?: string;
  /** Preview traffic counters. */
  previewStats?: PreviewStats;
  /**
   * Who may call, when not this worker's own credentials: a replica's `/rpc` accepts only
   * `replica:rpc` tokens signed with the installation key (DESIGN §7). Throws `unauthorized`.
   */
  authenticate?(headers: Record<string, string | string[] | undefined>): WorkerIdentity;
  /** Runs before a call about a sandbox is served (a replica reads the sandbox's record and lease). */
  prepare?(sandboxId: string): Promise<void>;
}
