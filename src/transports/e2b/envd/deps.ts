import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { AuthSettings } from '../../../core/auth/settings.js';
import type { SandboxRecord } from '../../../core/ports/index.js';
import type { Caller } from '../../../core/sandboxes/caller.js';
import type { ExecService } from '../../../core/sandboxes/exec.js';
import type { FileService } from '../../../core/sandboxes/files.js';
import type { ProcessService } from '../../../core/sandboxes/processes.js';
import type { SandboxService } from '../../../core/sandboxes/service.js';
import type { CoreSettings } from '../../../core/settings.js';

export type { WatchEvent } from '../../../core/ports/index.js';
import type { WatchEvent } from '../../../core/ports/index.js';

/**
 * The narrow face of sbx's file watch the envd plane needs (DESIGN.md §16 `watchFiles`). Absent
 * until the watch is wired: the filesystem service's watch methods then answer `unimplemented`.
 */
export interface EnvdWatch {
  watchFiles(
    caller: Caller,
    sandboxId: string,
    path: string,
    opts: { recursive: boolean },
    signal: AbortSignal,
  ): Promise<AsyncIterable<WatchEvent>>;
}

/**
 * What the envd plane (DESIGN.md §14: E2B's in-sandbox API, served by sbx) drives: the same core
 * services as the native routes — exec, background processes, files, watch — so ownership,
 * limits and events are theirs. Built by the HTTP app from its own deps.
 */
export interface EnvdDeps {
  settings: CoreSettings;
  auth: AuthSettings;
  sandboxes: SandboxService;
  exec: ExecService;
  files: FileService;
  /** Background processes: E2B's commands. Absent → the process service answers `unimplemented`. */
  processes?: ProcessService;
  watch?: EnvdWatch;
  /** Installation secret: envd access tokens are derived from it (core/auth/access-token.ts). */
  installationSecret: string;
  /** Forwards a request to TCP `port` of a sandbox (the §9 preview upstream), for `E2b-Sandbox-Port` ≠ 49983. */
  forwardPort?(req: IncomingMessage, res: ServerResponse, sandboxId: string, port: number, path: string): void;
  /** The same for an upgrade (a WebSocket): the client's socket is spliced to the sandbox's port. */
  forwardUpgrade?(req: IncomingMessage, socket: Socket, head: Buffer, sandboxId: string, port: number, path: string): void;
  /**
   * E2B's `autoResume` hook: called with the sandbox before every envd call. Pause (§16) wires it
   * to resume a paused sandbox first; until then every live sandbox is running and it is absent.
   */
  wake?(rec: SandboxRecord, caller: Caller): Promise<void>;
}
