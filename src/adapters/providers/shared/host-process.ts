import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { constants } from 'node:os';
import type { ExecControl, ExecEvent } from '../../../core/ports/index.js';
import type { ProcessSpec } from './exec-process.js';
import { groupMembers, killMembers, killTree, signalWhenReady, treeMembers } from './process-tree.js';

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

/**
 * One host process while an exec runs it: its output queued (the pipes paused above the high mark),
 * its exit from the process or the status channel, the kills and signals to its group or, under a
 * guest keeper, to the command's tree.
 */
export class HostProcess {
  exitCode: number | null = null;
  closed = false;
  spawnError: NodeJS.ErrnoException | null = null;
  /** The guest keeper died before it started the command. */
  keeperLost = false;
  readonly status: NodeJS.ReadableStream | null;
  private readonly queue: ExecEvent[] = [];
  private queuedBytes = 0;
  private paused = false;
  private killedAt: number | null = null;
  private lastOutputAt = Date.now();
  private notify: (() => void) | null = null;
  // The command's host pid under a guest keeper (`p` on fd 3), resolved on first need.
  private guestPid: number | null = null;
  private guestRoot: Promise<number | null> | null = null;

  constructor(
    private readonly spec: ProcessSpec,
    readonly child: ChildProcessWithoutNullStreams,
  ) {
    this.status = spec.statusFd || spec.guest ? (child.stdio[3] as NodeJS.ReadableStream | null) : null;
    this.listen();
  }

  readonly running = (): boolean => this.exitCode === null;

  wake(): void {
    const n = this.notify;
    this.notify = null;
    n?.();
  }

  private commandRoot(): Promise<number | null> {
    if (!this.spec.guest || this.guestPid === null) return Promise.resolve(null);
    this.guestRoot ??= this.spec.guest.hostPid(this.guestPid);
    return this.guestRoot;
  }

  killGroup(): void {
    const { child, spec } = this;
    if (this.killedAt === null) this.killedAt = Date.now();
    if (child.pid === undefined) return;
    if (spec.guest) {
      void this.commandRoot().then((root) => (root === null ? undefined : killTree(root)));
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
  }

  private exited(code: number): void {
    this.exitCode = code;
    this.lastOutputAt = Date.now();
    this.wake();
  }

  private listen(): void {
    const { child, spec } = this;
    const onData = (type: 'stdout' | 'stderr') => (buf: Buffer) => {
      this.queue.push({ stream: type, data: buf });
      this.queuedBytes += buf.length;
      this.lastOutputAt = Date.now();
      if (!this.paused && this.queuedBytes > HIGH_WATER) {
        this.paused = true;
        child.stdout.pause();
        child.stderr.pause();
      }
      this.wake();
    };
    child.stdout.on('data', onData('stdout'));
    child.stderr.on('data', onData('stderr'));
    child.on('error', (err) => {
      this.spawnError = err;
      this.wake();
    });
    child.on('exit', (code, sig) => {
      // A status the wrapper reported stands (the tracer's own code says nothing more); after a kill
      // that spared the tracer, the tracer's clean exit is still a killed command.
      // Under a guest keeper the launcher's exit says nothing of the command's (fd 3 does).
      if (this.exitCode === null && !spec.guest)
        this.exitCode = this.killedAt !== null && spec.killSpares ? KILLED_EXIT_CODE : (code ?? signalExitCode(sig));
      this.lastOutputAt = Date.now();
      this.wake();
    });
    child.on('close', () => {
      this.closed = true;
      this.wake();
    });
    if (this.status)
      readStatus(this.status, {
        started: (nsPid) => {
          if (spec.guest && this.guestPid === null) this.guestPid = nsPid;
        },
        status: (code) => {
          if (this.exitCode === null) this.exited(code);
        },
        // Under a guest keeper, the channel's end without a status: the command was killed.
        end: () => {
          if (spec.guest && this.exitCode === null) this.exited(KILLED_EXIT_CODE);
        },
      });
  }

  /** A signal from the controls: to the command's tree under a guest keeper, else to the group (sparing what it must). */
  async signal(c: ExecControl): Promise<void> {
    const { child, spec } = this;
    if (c.type !== 'signal' || child.pid === undefined || this.exitCode !== null) return;
    // A signal right after the start may come before the wrapper started the command: it waits
    // for the command (briefly) instead of being lost.
    const pgid = child.pid;
    if (spec.guest) {
      const tree = async () => {
        const root = await this.commandRoot();
        return root === null ? [] : treeMembers(root);
      };
      await (c.signal === 'SIGKILL' ? killTree((await this.commandRoot()) ?? -1) : signalWhenReady(tree, c.signal, this.running));
      return;
    }
    if (spec.signalSpares && c.signal !== 'SIGKILL') {
      await signalWhenReady(() => groupMembers(pgid, spec.signalSpares === 'init'), c.signal, this.running);
      return;
    }
    try {
      process.kill(-child.pid, c.signal);
    } catch {
      // ESRCH: the group is already gone.
    }
  }

  /** Until the command started, a guest keeper is watched: one killed from inside starts nothing. */
  watchKeeper(): NodeJS.Timeout | undefined {
    const guest = this.spec.guest;
    if (!guest) return undefined;
    const watch = setInterval(() => {
      if (this.guestPid !== null || this.exitCode !== null) return clearInterval(watch);
      void guest.alive().then((up) => {
        if (up || this.guestPid !== null) return;
        this.keeperLost = true;
        clearInterval(watch);
        this.wake();
      });
    }, KEEPER_CHECK_MS);
    return watch;
  }

  /**
   * The next output in arrival order, or undefined once the exec is over: the process gone and its
   * pipes closed or quiet, a kill's grace passed, a start failed or the keeper lost.
   */
  async next(): Promise<ExecEvent | undefined> {
    const { child } = this;
    for (;;) {
      const ev = this.queue.shift();
      if (ev) {
        if (ev.stream !== 'exit') this.queuedBytes -= ev.data.byteLength;
        if (this.paused && this.queuedBytes < LOW_WATER) {
          this.paused = false;
          child.stdout.resume();
          child.stderr.resume();
        }
        return ev;
      }
      if (this.spawnError || this.keeperLost) return undefined;
      if (this.exitCode !== null && this.closed) return undefined;
      let waitMs: number | undefined;
      if (this.killedAt !== null) {
        const left = this.killedAt + KILL_GRACE_MS - Date.now();
        if (left <= 0) return undefined;
        waitMs = left;
      }
      if (this.exitCode !== null && !this.paused) {
        const left = this.lastOutputAt + QUIET_AFTER_EXIT_MS - Date.now();
        if (left <= 0) return undefined;
        waitMs = Math.min(waitMs ?? left, left);
      }
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.notify = resolve;
        if (waitMs !== undefined) timer = setTimeout(() => this.wake(), waitMs);
      });
      clearTimeout(timer);
    }
  }

  /** After the exec: killed unless it exited; its pipes closed, or read on for what it left running. */
  finish(): void {
    const { child, spec } = this;
    if (this.exitCode === null) this.killGroup();
    (this.status as { destroy?: () => void } | null)?.destroy?.();
    child.stdin.destroy();
    if (this.exitCode !== null && !this.closed && spec.onLeftover) keepReading(child, spec.onLeftover);
    else {
      child.stdout.destroy();
      child.stderr.destroy();
    }
  }
}
