import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { constants } from 'node:os';
import { badRequest, providerError } from '../../../core/errors.js';
import type { ExecControl, ExecEvent } from '../../../core/ports/index.js';
import { consumeControls, isLiveStdin, type Pump, pumpStdin } from './live-input.js';
import { groupMembers, killMembers, killTree, signalWhenReady, treeMembers } from './process-tree.js';

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

/** Exit code reported for a command killed by SIGKILL (abort, early stop). */
export const KILLED_EXIT_CODE = 128 + constants.signals.SIGKILL;
/** Pause the child's pipes above this many queued bytes; resume below the low mark. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/**
 * After the command exits, keep reading until its pipes close, or until they stay quiet this long:
 * a background process (`server &`) may hold them open for good and must not hold the exec.
 */
const QUIET_AFTER_EXIT_MS = 200;
/** How often a guest keeper is looked at while an exec waits for it to start the command. */
const KEEPER_CHECK_MS = 1_000;
/** After a kill, end even if the exit is never observed (e.g. an unkillable process). */
const KILL_GRACE_MS = 2_000;

function signalExitCode(signal: NodeJS.Signals | null): number {
  const n = signal ? constants.signals[signal] : undefined;
  return n !== undefined ? 128 + n : KILLED_EXIT_CODE;
}

/**
 * The status channel (fd 3): `p <pid in the namespace>` when a guest keeper started the command,
 * then its status as a line of digits; its end.
 */
function readStatus(stream: NodeJS.ReadableStream, on: { started(nsPid: number): void; status(code: number): void; end(): void }): void {
  let text = '';
  stream.on('data', (buf: Buffer) => {
    text += buf.toString('latin1');
    for (let nl = text.indexOf('\n'); nl >= 0 && text.length < 256; nl = text.indexOf('\n')) {
      const line = text.slice(0, nl);
      text = text.slice(nl + 1);
      const started = /^p (\d{1,9})$/.exec(line);
      if (started) on.started(Number(started[1]));
      else if (/^\d{1,3}$/.test(line)) on.status(Number(line));
    }
  });
  stream.on('error', () => undefined);
  stream.on('end', () => on.end());
}

/**
 * After the exec: what the command left running may still hold its output. Read on (never
 * blocking it on a full pipe or killing it with SIGPIPE), without keeping the server up.
 */
function keepReading(child: ChildProcessWithoutNullStreams, leftover: NonNullable<ProcessSpec['onLeftover']>): void {
  for (const [name, stream] of [
    ['stdout', child.stdout],
    ['stderr', child.stderr],
  ] as const) {
    stream.removeAllListeners('data');
    stream.on('data', (buf: Buffer) => leftover(name, buf));
    stream.on('error', () => undefined);
    stream.resume();
    (stream as unknown as { unref?: () => void }).unref?.();
  }
  child.unref();
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

  const queue: ExecEvent[] = [];
  let queuedBytes = 0;
  let paused = false;
  let exitCode: number | null = null;
  let closed = false;
  let spawnError: NodeJS.ErrnoException | null = null;
  let killedAt: number | null = null;
  let lastOutputAt = Date.now();
  let notify: (() => void) | null = null;
  const wake = () => {
    const n = notify;
    notify = null;
    n?.();
  };

  // The command's host pid under a guest keeper (`p` on fd 3), resolved on first need.
  let guestPid: number | null = null;
  let guestRoot: Promise<number | null> | null = null;
  const commandRoot = (): Promise<number | null> => {
    if (!spec.guest || guestPid === null) return Promise.resolve(null);
    guestRoot ??= spec.guest.hostPid(guestPid);
    return guestRoot;
  };
  const killGroup = () => {
    if (killedAt === null) killedAt = Date.now();
    if (child.pid === undefined) return;
    if (spec.guest) {
      void commandRoot().then((root) => (root === null ? undefined : killTree(root)));
    }
    if (spec.killSpares) {
      void killMembers(child.pid, spec.killSpares === 'init');
      return;
    }
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      // ESRCH: the group is already gone.
    }
  };
  const onData = (type: 'stdout' | 'stderr') => (buf: Buffer) => {
    queue.push({ stream: type, data: buf });
    queuedBytes += buf.length;
    lastOutputAt = Date.now();
    if (!paused && queuedBytes > HIGH_WATER) {
      paused = true;
      child.stdout.pause();
      child.stderr.pause();
    }
    wake();
  };
  child.stdout.on('data', onData('stdout'));
  child.stderr.on('data', onData('stderr'));
  child.on('error', (err) => {
    spawnError = err;
    wake();
  });
  child.on('exit', (code, sig) => {
    // A status the wrapper reported stands (the tracer's own code says nothing more); after a kill
    // that spared the tracer, the tracer's clean exit is still a killed command.
    // Under a guest keeper the launcher's exit says nothing of the command's (fd 3 does).
    if (exitCode === null && !spec.guest)
      exitCode = killedAt !== null && spec.killSpares ? KILLED_EXIT_CODE : (code ?? signalExitCode(sig));
    lastOutputAt = Date.now();
    wake();
  });
  child.on('close', () => {
    closed = true;
    wake();
  });
  const status = spec.statusFd || spec.guest ? (child.stdio[3] as NodeJS.ReadableStream | null) : null;
  if (status)
    readStatus(status, {
      started: (nsPid) => {
        if (spec.guest && guestPid === null) guestPid = nsPid;
      },
      status: (code) => {
        if (exitCode !== null) return;
        exitCode = code;
        lastOutputAt = Date.now();
        wake();
      },
      // Under a guest keeper, the channel's end without a status: the command was killed.
      end: () => {
        if (!spec.guest || exitCode !== null) return;
        exitCode = KILLED_EXIT_CODE;
        lastOutputAt = Date.now();
        wake();
      },
    });
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
  if (spec.controls) {
    pumps.push(
      consumeControls(spec.controls, async (c) => {
        if (c.type !== 'signal' || child.pid === undefined || exitCode !== null) return;
        // A signal right after the start may come before the wrapper started the command: it waits
        // for the command (briefly) instead of being lost.
        const pgid = child.pid;
        if (spec.guest) {
          const tree = async () => {
            const root = await commandRoot();
            return root === null ? [] : treeMembers(root);
          };
          await (c.signal === 'SIGKILL' ? killTree((await commandRoot()) ?? -1) : signalWhenReady(tree, c.signal, running));
          return;
        }
        if (spec.signalSpares && c.signal !== 'SIGKILL') {
          await signalWhenReady(() => groupMembers(pgid, spec.signalSpares === 'init'), c.signal, running);
          return;
        }
        try {
          process.kill(-child.pid, c.signal);
        } catch {
          // ESRCH: the group is already gone.
        }
      }),
    );
  }

  const running = () => exitCode === null;
  // Until the command started, a guest keeper is watched: one killed from inside starts nothing.
  let keeperLost = false;
  const guest = spec.guest;
  const watch = guest
    ? setInterval(() => {
        if (guestPid !== null || exitCode !== null) return clearInterval(watch);
        void guest.alive().then((up) => {
          if (up || guestPid !== null) return;
          keeperLost = true;
          clearInterval(watch);
          wake();
        });
      }, KEEPER_CHECK_MS)
    : undefined;
  const onAbort = () => {
    killGroup();
    wake();
  };
  signal.addEventListener('abort', onAbort, { once: true });

  try {
    for (;;) {
      const ev = queue.shift();
      if (ev) {
        if (ev.stream !== 'exit') queuedBytes -= ev.data.byteLength;
        if (paused && queuedBytes < LOW_WATER) {
          paused = false;
          child.stdout.resume();
          child.stderr.resume();
        }
        yield ev;
        continue;
      }
      if (spawnError || keeperLost) break;
      if (exitCode !== null && closed) break;
      let waitMs: number | undefined;
      if (killedAt !== null) {
        const left = killedAt + KILL_GRACE_MS - Date.now();
        if (left <= 0) break;
        waitMs = left;
      }
      if (exitCode !== null && !paused) {
        const left = lastOutputAt + QUIET_AFTER_EXIT_MS - Date.now();
        if (left <= 0) break;
        waitMs = Math.min(waitMs ?? left, left);
      }
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        notify = resolve;
        if (waitMs !== undefined) timer = setTimeout(wake, waitMs);
      });
      clearTimeout(timer);
    }
    if (keeperLost && guest) {
      killGroup();
      await guest.lost();
      throw providerError("the sandbox's keeper is gone (ended from inside): its processes were ended; the next exec starts a new one");
    }
    if (spawnError && exitCode === null) {
      const err: NodeJS.ErrnoException = spawnError;
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
    yield { stream: 'exit', exit_code: exitCode ?? KILLED_EXIT_CODE };
  } finally {
    clearInterval(watch);
    for (const p of pumps) p.stop();
    spec.onEnd?.();
    signal.removeEventListener('abort', onAbort);
    if (exitCode === null) killGroup();
    (status as { destroy?: () => void } | null)?.destroy?.();
    child.stdin.destroy();
    if (exitCode !== null && !closed && spec.onLeftover) keepReading(child, spec.onLeftover);
    else {
      child.stdout.destroy();
      child.stderr.destroy();
    }
  }
}
