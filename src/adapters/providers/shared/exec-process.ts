import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import { badRequest, providerError } from '../../../core/errors.js';
import type { ExecControl, ExecEvent } from '../../../core/ports.js';
import { consumeControls, isLiveStdin, type Pump, pumpStdin } from './live-input.js';

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
   * The child is a stub that has a keeper's guest start the command (keeper.ts GUEST_EXEC_STUB):
   * `script` goes to its fd 4; fd 3 carries `p <pid in the namespace>`, then the status (its end
   * without one: killed). Signals and kills go to the command's process tree, found by `hostPid`.
   */
  guest?: { script: string; hostPid(nsPid: number): Promise<number | null> };
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
/** After a kill, end even if the exit is never observed (e.g. an unkillable process). */
const KILL_GRACE_MS = 2_000;

function signalExitCode(signal: NodeJS.Signals | null): number {
  const n = signal ? constants.signals[signal] : undefined;
  return n !== undefined ? 128 + n : KILLED_EXIT_CODE;
}

interface Member {
  pid: number;
  ppid: number;
  /** Signals with a handler installed (bit n-1 for signal n). */
  caught: bigint;
  /** It is the guest wrapper of isolation.ts (still starting, or waiting for the command). */
  wrapper: boolean;
  /** Its parent is the wrapper: with `wrapper`, a copy forked to run the command, not yet replaced by it. */
  forked: boolean;
}

/** How the guest wrapper's command line begins (isolation.ts GUEST_WRAPPER). */
const WRAPPER_CMDLINE = '/bin/sh\0-c\0unset __sbx_s;';

/**
 * The processes of group `pgid` but its leader (and with `spareChildren` the leader's children)
 * (Linux /proc).
 */
async function groupMembers(pgid: number, spareChildren: boolean): Promise<Member[]> {
  const members: Member[] = [];
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name) || Number(name) === pgid) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // Fields after the command name `(…)`: state, ppid, pgrp, …
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    if (spareChildren && Number(fields[1]) === pgid) continue;
    const status = await readFile(`/proc/${name}/status`, 'utf8').catch(() => '');
    const cgt = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const wrapper = (await readFile(`/proc/${name}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    const forked = wrapper && (await readFile(`/proc/${fields[1]}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    members.push({ pid: Number(name), ppid: Number(fields[1]), caught: cgt ? BigInt(`0x${cgt}`) : 0n, wrapper, forked });
  }
  return members;
}

/**
 * Whether the command can take `sig` now: someone is there to get it, and a guest wrapper among
 * them has its traps installed (before that, a signal can be lost in its start-up: proot's
 * loader drops them), so it either passes to the command or is remembered by the wrapper.
 */
function readyFor(members: Member[], sig: NodeJS.Signals): boolean {
  const n = constants.signals[sig];
  if (members.length === 0) return false;
  if (n === undefined) return true;
  return members.every((m) => {
    if (!m.wrapper) return true;
    // A copy of the wrapper forked to run the command but not yet replaced by it still carries the
    // wrapper's traps: a signal now would be swallowed. Wait until it is the command.
    if (m.forked) return false;
    return ((m.caught >> BigInt(n - 1)) & 1n) === 1n;
  });
}

/**
 * How long a signal sent before the wrapper started the command waits for it (then it is sent
 * anyway). A window of a few instructions remains between the wrapper's last look at a remembered
 * signal and its fork of the command; a signal landing exactly there still reaches only the wrapper.
 */
const SIGNAL_WAIT_MS = 10_000;

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
    // Under a guest keeper the stub's exit says nothing of the command's (fd 3 does).
    if (exitCode === null && !spec.guest)
      exitCode = killedAt !== null && spec.killSpares ? KILLED_EXIT_CODE : (code ?? signalExitCode(sig));
    lastOutputAt = Date.now();
    wake();
  });
  child.on('close', () => {
    closed = true;
    wake();
  });
  let statusText = '';
  const status = spec.statusFd || spec.guest ? (child.stdio[3] as NodeJS.ReadableStream | null) : null;
  status?.on('data', (buf: Buffer) => {
    statusText += buf.toString('latin1');
    for (let nl = statusText.indexOf('\n'); nl >= 0 && statusText.length < 256; nl = statusText.indexOf('\n')) {
      const line = statusText.slice(0, nl);
      statusText = statusText.slice(nl + 1);
      const started = /^p (\d{1,9})$/.exec(line);
      if (started && spec.guest && guestPid === null) guestPid = Number(started[1]);
      else if (/^\d{1,3}$/.test(line) && exitCode === null) {
        exitCode = Number(line);
        lastOutputAt = Date.now();
        wake();
      }
    }
  });
  status?.on('error', () => undefined);
  // Under a guest keeper, the status channel's end without a status: the command was killed.
  status?.on('end', () => {
    if (!spec.guest || exitCode !== null) return;
    exitCode = KILLED_EXIT_CODE;
    lastOutputAt = Date.now();
    wake();
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
        if (spec.guest) {
          await signalGuest(c.signal);
          return;
        }
        if (spec.signalSpares && c.signal !== 'SIGKILL') {
          // A signal right after the start may come before the wrapper started the command: it
          // waits for the command (briefly) instead of being lost.
          const until = performance.now() + SIGNAL_WAIT_MS;
          let members = await groupMembers(child.pid, spec.signalSpares === 'init');
          while (!readyFor(members, c.signal) && exitCode === null && performance.now() < until) {
            await new Promise((r) => setTimeout(r, 20));
            members = await groupMembers(child.pid, spec.signalSpares === 'init');
          }
          for (const m of members) {
            try {
              process.kill(m.pid, c.signal);
            } catch {
              // Gone meanwhile.
            }
          }
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

  /** A signal to the command's process tree under a guest keeper, once the command started. */
  const signalGuest = async (sig: NodeJS.Signals) => {
    const until = performance.now() + SIGNAL_WAIT_MS;
    let root = await commandRoot();
    let members = root === null ? [] : await treeMembers(root);
    while (!readyFor(members, sig) && exitCode === null && performance.now() < until) {
      await new Promise((r) => setTimeout(r, 20));
      root = await commandRoot();
      members = root === null ? [] : await treeMembers(root);
    }
    for (const m of members) {
      try {
        process.kill(m.pid, sig);
      } catch {
        // Gone meanwhile.
      }
    }
  };
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
      if (spawnError) break;
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
    for (const p of pumps) p.stop();
    spec.onEnd?.();
    signal.removeEventListener('abort', onAbort);
    if (exitCode === null) killGroup();
    (status as { destroy?: () => void } | null)?.destroy?.();
    child.stdin.destroy();
    if (exitCode !== null && !closed && spec.onLeftover) {
      // What the command left running may still hold its output: read on (never blocking it
      // on a full pipe or killing it with SIGPIPE), without keeping the server up.
      const leftover = spec.onLeftover;
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
    } else {
      child.stdout.destroy();
      child.stderr.destroy();
    }
  }
}

/** The process tree rooted at `root` (root included), from /proc. */
async function treeMembers(root: number): Promise<Member[]> {
  const parent = new Map<number, number>();
  for (const name of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    parent.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  if (!parent.has(root)) return [];
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid, depth = 0; p !== undefined && p > 1 && depth < 512; p = parent.get(p), depth++)
      if (p === root) return true;
    return false;
  };
  const members: Member[] = [];
  for (const pid of parent.keys()) {
    if (!inTree(pid)) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const cgt = /^SigCgt:\s*([0-9a-f]+)$/m.exec(status)?.[1];
    const ppid = parent.get(pid)!;
    const wrapper = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    const forked = wrapper && (await readFile(`/proc/${ppid}/cmdline`, 'utf8').catch(() => '')).startsWith(WRAPPER_CMDLINE);
    members.push({ pid, ppid, caught: cgt ? BigInt(`0x${cgt}`) : 0n, wrapper, forked });
  }
  return members;
}

/** SIGKILLs the process tree rooted at `root`, twice (a process forked meanwhile is caught by the second pass). */
async function killTree(root: number): Promise<void> {
  for (let pass = 0; pass < 2; pass++) {
    for (const m of await treeMembers(root)) {
      try {
        process.kill(m.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  }
}

/** SIGKILLs the members of group `pgid` but its leader (and with `spareChildren` the leader's children). */
async function killMembers(pgid: number, spareChildren: boolean): Promise<void> {
  // Twice: a process forked while the first pass ran is caught by the second.
  for (let pass = 0; pass < 2; pass++) {
    for (const m of await groupMembers(pgid, spareChildren)) {
      try {
        process.kill(m.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    }
  }
}
