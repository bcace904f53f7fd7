import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { badRequest, providerError } from '../../../core/errors.js';
import type { ExecControl, ExecEvent } from '../../../core/ports/index.js';
import { HostProcess, KILLED_EXIT_CODE } from './host-process.js';
import { consumeControls, isLiveStdin, type Pump, pumpStdin } from './live-input.js';

export { KILLED_EXIT_CODE } from './host-process.js';

export interface ProcessSpec {
  file: string;
  args: readonly string[];
  cwd?: string;
  env: Record<string, string>;
  /** Bytes written to stdin, then EOF; or a live stream, each chunk written as it arrives. */
  stdin?: Uint8Array | AsyncIterable<Uint8Array>;
  /** Signals go to the whole process group; resizes are ignored (pipes, no terminal). */
  controls?: AsyncIterable<ExecControl>;
  /**
   * Signals (but SIGKILL) skip `leader`, the group leader: for a leader that is a tracer (proot),
   * which must outlive the command to report its exit status; or `init`, the leader and its
   * children: for a PID-namespace launcher (`unshare`) and the namespace's init below it.
   */
  signalSpares?: 'leader' | 'init';
  /**
   * The file is a launcher of sbx's own (namespace, tracer) rather than the user's command: a
   * failure to start it is a provider error, not the command's 127/126.
   */
  launcher?: boolean;
  /** Called with the group leader's pid once the process started. */
  onSpawn?: (pid: number) => void;
  /** Descriptors passed to the child from fd 5 on (a keeper's namespaces for nsenter). */
  fds?: readonly number[];
  /**
   * The command's status comes as a line on the child's fd 3 (the guest wrapper as `sbx+status`):
   * the exec ends with it even while the child (a tracer) lives on for what the command left running.
   */
  statusFd?: boolean;
  /**
   * A kill (abort, early stop) spares these too, like signals do: a tracer must never die before
   * its tracees, which would then run on untraced.
   */
  killSpares?: 'leader' | 'init';
  /** Output that arrives after the exec ended (what the command left running still writes). */
  onLeftover?: (stream: 'stdout' | 'stderr', data: Buffer) => void;
  /**
   * The child is a launcher that has a keeper's guest start the command (keeper.ts GUEST_EXEC_LAUNCHER):
   * `script` goes to its fd 4; fd 3 carries `p <pid in the namespace>`, then the status (its end
   * without one: killed). Signals and kills go to the command's process tree, found by `hostPid`.
   */
  guest?: {
    script: string;
    hostPid(nsPid: number): Promise<number | null>;
    /** Whether the keeper that should start the command still runs (checked until it started). */
    alive(): Promise<boolean>;
    /** The keeper is gone: the exec fails (provider_error) after this. */
    lost(): Promise<void>;
  };
  /** Called once the exec is over. */
  onEnd?: () => void;
}

/** Rejects what the OS cannot pass to a process, as the caller's mistake rather than a crash. */
function checkSpec(spec: ProcessSpec): void {
  if (spec.file.length === 0) throw badRequest('command is empty');
  if ([spec.file, ...spec.args].some((a) => a.includes('\0'))) throw badRequest('command and args must not contain NUL bytes');
  checkEnv(spec.env);
}

/** Environment names must be non-empty without `=` or NUL; values without NUL. */
export function checkEnv(env: Record<string, string>): void {
  for (const [k, v] of Object.entries(env)) {
    if (k.length === 0 || k.includes('=') || k.includes('\0')) throw badRequest(`invalid environment variable name ${JSON.stringify(k)}`);
    if (v.includes('\0')) throw badRequest(`environment variable ${k} must not contain NUL bytes`);
  }
}

/** The child in its own process group: stdio pipes, plus the status channel (fd 3), the guest script (fd 4) and passed descriptors. */
function startChild(spec: ProcessSpec): ChildProcessWithoutNullStreams {
  const extra: Array<'pipe' | 'ignore' | number> = spec.fds?.length ? ['ignore', 'ignore', ...spec.fds] : [];
  if (spec.statusFd || spec.guest) extra[0] = 'pipe';
  if (spec.guest) extra[1] = 'pipe';
  const child = spawn(spec.file, [...spec.args], {
    cwd: spec.cwd,
    env: spec.env,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', ...extra],
  }) as ChildProcessWithoutNullStreams;
  if (child.pid !== undefined) spec.onSpawn?.(child.pid);
  return child;
}

/** The child's inputs: the guest script, stdin (bytes then EOF, or live), the controls' signals. */
function startInputs(spec: ProcessSpec, proc: HostProcess): Pump[] {
  const { child } = proc;
  if (spec.guest) {
    const script = child.stdio[4] as NodeJS.WritableStream;
    script.on('error', () => undefined);
    script.end(spec.guest.script);
  }
  // EPIPE when the command exits without reading its stdin is expected.
  child.stdin.on('error', () => undefined);
  const pumps: Pump[] = [];
  if (isLiveStdin(spec.stdin)) {
    pumps.push(pumpStdin(spec.stdin, child.stdin));
  } else {
    child.stdin.end(spec.stdin && spec.stdin.byteLength > 0 ? Buffer.from(spec.stdin) : undefined);
  }
  if (spec.controls) pumps.push(consumeControls(spec.controls, (c) => proc.signal(c)));
  return pumps;
}

/**
 * Runs a host process in its own process group and yields its output in arrival order, then one
 * `exit` (a signal death is 128 + signo). Aborting the signal, or the consumer stopping early, kills
 * the whole group with SIGKILL. A slow consumer pauses the child's pipes instead of buffering.
 */
export async function* execProcess(spec: ProcessSpec, signal: AbortSignal): AsyncGenerator<ExecEvent, void, undefined> {
  checkSpec(spec);
  if (signal.aborted) {
    yield { stream: 'exit', exit_code: KILLED_EXIT_CODE };
    return;
  }
  const proc = new HostProcess(spec, startChild(spec));
  const pumps = startInputs(spec, proc);
  const watch = proc.watchKeeper();
  const onAbort = () => {
    proc.killGroup();
    proc.wake();
  };
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    for (let ev = await proc.next(); ev; ev = await proc.next()) yield ev;
    if (proc.keeperLost && spec.guest) {
      proc.killGroup();
      await spec.guest.lost();
      throw providerError("the sandbox's keeper is gone (ended from inside): its processes were ended; the next exec starts a new one");
    }
    const err = proc.spawnError;
    if (err && proc.exitCode === null) {
      // Like a shell: a missing program is 127, one that cannot be executed is 126.
      if (!spec.launcher && (err.code === 'ENOENT' || err.code === 'EACCES')) {
        yield {
          stream: 'stderr',
          data: Buffer.from(`sbx: ${err.code === 'ENOENT' ? 'command not found' : 'permission denied'}: ${spec.file}\n`),
        };
        yield { stream: 'exit', exit_code: err.code === 'ENOENT' ? 127 : 126 };
        return;
      }
      throw providerError(`could not start the command (${err.code ?? 'unknown error'})`);
    }
    yield { stream: 'exit', exit_code: proc.exitCode ?? KILLED_EXIT_CODE };
  } finally {
    clearInterval(watch);
    for (const p of pumps) p.stop();
    spec.onEnd?.();
    signal.removeEventListener('abort', onAbort);
    proc.finish();
  }
}
