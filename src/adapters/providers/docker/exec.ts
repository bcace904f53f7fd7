import { randomBytes } from 'node:crypto';
import type { Duplex, Readable } from 'node:stream';
import type Docker from 'dockerode';
import type { ExecControl, ExecEvent, ExecSignal, ExecSpec } from '../../../core/ports/index.js';
import { consumeControls, isLiveStdin, type Pump, pumpStdin } from '../shared/live-input.js';
import { buildShellCommand } from '../../../shared/shell.js';
import { badRequest, isAbortError, isSbxError, SbxError } from '../../../core/errors.js';
import { API_TIMEOUT_MS, bounded, call, toSbxError } from './errors.js';
import { demux, type Frame } from './frames.js';
import { WORKDIR } from './options.js';

/**
 * Every exec carries a unique marker in its environment, which all its descendants inherit, so
 * an abort can find and kill the whole tree (background jobs and daemonized children included)
 * from a second exec, without wrapping the command or writing files in the sandbox. Passes repeat
 * while processes that were forking during a pass still show up.
 */
const MARKER = 'SBX_EXEC_ID';
const KILLER = [
  'for i in 1 2 3 4 5 6 7 8; do',
  '  l=$(grep -lxzsF "$1" /proc/[0-9]*/environ)',
  '  if [ -z "$l" ]; then [ "$i" -gt 3 ] && exit 0; sleep 0.05; continue; fi',
  '  for f in $l; do d=${f%/environ}; kill -9 "${d#/proc/}" 2>/dev/null; done',
  'done',
].join('\n');
/** One pass of a signal to every process of an exec: `$1` the marker, `$2` the signal name without SIG. */
const SIGNALLER =
  'for f in $(grep -lxzsF "$1" /proc/[0-9]*/environ); do d=${f%/environ}; kill -"$2" "${d#/proc/}" 2>/dev/null; done; exit 0';

/**
 * In a terminal, SIGINT and SIGQUIT are what ^C and ^\ produce: the key goes in with stdin and the
 * terminal signals its foreground process group, so an interactive shell survives while the job it
 * runs stops, and typed-ahead input stays in order with the signal.
 */
const TERMINAL_KEYS: Partial<Record<ExecSignal, string>> = { SIGINT: '\x03', SIGQUIT: '\x1c' };

/** Grace after the kill for the output stream to end by itself before it is cut. */
const KILL_GRACE_MS = 1_000;

// What runc (or gVisor's runsc) prints, as output with exit 126, when the working directory cannot be entered.
const BAD_WORKDIR = new RegExp(
  [
    '^OCI runtime exec failed: (?:exec failed: .*chdir to cwd \\("/',
    '|executing processes for container: .* in sandbox: failed to find initial working directory "/)',
  ].join(''),
  's',
);
// What runc (or runsc) prints, as output with exit 126, when the command itself cannot be started.
const EXEC_FAILED = new RegExp(
  [
    '^OCI runtime exec failed: (?:exec failed: .*exec: "(?:[^"\\\\]|\\\\.)*": ',
    '|executing processes for container: executing command "(?:[^"\\\\]|\\\\.)*" in sandbox: )(.*)$',
  ].join(''),
  's',
);
// runsc's PATH search, like runc's, refuses relative entries: the shell then searches instead.
const PATH_REFUSED = /not found in \$PATH|relative to current directory|error finding executable "(?:[^"\\]|\\.)*" in PATH/;

export interface ExecOptions {
  /** Called with every output chunk (console capture); must not block. */
  onOutput?: (stream: 'stdout' | 'stderr', data: Uint8Array) => void;
  /** Internal: the answer when the PATH search by shell cannot start either. */
  lookupFailed?: { stderr: string; exitCode: number };
}

/** The argv the engine runs for `spec`. */
export function execArgv(spec: Pick<ExecSpec, 'command' | 'args' | 'mode'>): string[] {
  return spec.mode === 'argv'
    ? [spec.command, ...spec.args]
    : ['/bin/sh', '-c', shellGuard(spec.command) + buildShellCommand(spec.command, spec.args)];
}

/** sbx's own messages (DESIGN §5) for a command that does not exist or cannot be executed. */
export const notFoundText = (name: string) => `sbx: command not found: ${name}\n`;
export const deniedText = (name: string) => `sbx: permission denied: ${name}\n`;

// A shell command that is one simple command: plain words only (no operators, quotes, expansions,
// redirections or globs), the first neither an option nor an assignment.
const SIMPLE_COMMAND = /^[A-Za-z0-9_./+@%:,][A-Za-z0-9_./+@%:,-]*(?:[ \t]+[A-Za-z0-9_./+@%:,=-]+)*[ \t]*$/;

/**
 * For shell mode, when the command is one simple command, a check before it that answers as argv
 * mode does (127 `sbx: command not found: NAME`, 126 `sbx: permission denied: NAME`) instead of the
 * shell's own text. Builtins count as found. Anything more complex runs as written, and the
 * shell's own message stands.
 */
export function shellGuard(command: string): string {
  if (!SIMPLE_COMMAND.test(command)) return '';
  const name = command.trim().split(/[ \t]+/)[0]!;
  if (name.includes('=')) return '';
  const q = `'${name}'`;
  const nf = `{ printf 'sbx: command not found: %s\\n' ${q} >&2; exit 127; }`;
  const pd = `{ printf 'sbx: permission denied: %s\\n' ${q} >&2; exit 126; }`;
  return name.includes('/')
    ? `if [ ! -e ${q} ]; then ${nf}; elif [ -d ${q} ] || [ ! -x ${q} ]; then ${pd}; fi\n`
    : `command -v ${q} >/dev/null 2>&1 || ${nf}\n`;
}

/**
 * runc's PATH search refuses relative entries (`.`, `bin`) and skips files that are not executable.
 * When it finds nothing, the shell searches as a shell would: it runs a match, and tells a file
 * that exists but cannot be executed (126) from none at all (127). `$1` the name, then the args.
 */
const PATH_SEARCH = [
  'n=$1; shift; x=; f=; o=$IFS; IFS=:; set -f',
  'for d in $PATH; do d=${d:-.}; if [ -f "$d/$n" ] && [ -x "$d/$n" ]; then x=$d/$n; break; fi; [ -e "$d/$n" ] && f=1; done',
  'IFS=$o; set +f',
  '[ -n "$x" ] && exec "$x" "$@"',
  `[ -n "$f" ] && { printf 'sbx: permission denied: %s\\n' "$n" >&2; exit 126; }`,
  `printf 'sbx: command not found: %s\\n' "$n" >&2; exit 127`,
].join('\n');

/** sbx's stderr and exit code for runc's text about a command it could not start, or undefined. */
function execFailure(name: string, text: string): { stderr: string; exitCode: number } | undefined {
  const why = EXEC_FAILED.exec(text)?.[1];
  if (why === undefined) return undefined;
  if (/executable file not found|no such file or directory/.test(why)) return { stderr: notFoundText(name), exitCode: 127 };
  if (/permission denied|is a directory/.test(why)) return { stderr: deniedText(name), exitCode: 126 };
  return { stderr: `sbx: cannot execute: ${name}\n`, exitCode: 126 };
}

/** A terminal's output is one raw stream, not multiplexed frames: all of it is stdout. */
async function* rawFrames(source: AsyncIterable<Uint8Array | string>): AsyncGenerator<Frame> {
  for await (const chunk of source) yield { stream: 'stdout', data: typeof chunk === 'string' ? Buffer.from(chunk) : chunk };
}

/**
 * Streams one command through the engine exec API: output chunks as they arrive (pulled, so a
 * slow consumer slows the command instead of growing a buffer), then the exit code from exec
 * inspect. On abort, or when the consumer stops early, every process of the command is killed
 * inside the container and the iteration ends. stdin is attached (hijacked connection) when there
 * are bytes or a live stream: chunks are written as they arrive, then the write side is half-closed.
 * With `tty` the exec gets a terminal (output raw, unframed), resized on `resize` controls.
 */
export async function* streamExec(
  docker: Docker,
  runtimeId: string,
  spec: ExecSpec,
  signal: AbortSignal,
  options: ExecOptions = {},
): AsyncGenerator<ExecEvent> {
  if (signal.aborted) return;
  const container = docker.getContainer(runtimeId);
  const marker = `${MARKER}=${randomBytes(12).toString('hex')}`;
  const live = isLiveStdin(spec.stdin);
  const withStdin = live || (spec.stdin !== undefined && (spec.stdin as Uint8Array).byteLength > 0);
  const tty = spec.tty;
  const workdir = spec.workdir ?? WORKDIR;
  const exec = await call(
    'exec',
    (s) =>
      container.exec({
        Cmd: execArgv(spec),
        // The marker goes last so a caller's own SBX_EXEC_ID cannot hide the command from the killer.
        Env: [...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`), marker],
        WorkingDir: workdir,
        ...(spec.user ? { User: `${spec.user.uid}:${spec.user.gid}` } : {}),
        AttachStdin: withStdin,
        AttachStdout: true,
        AttachStderr: true,
        Tty: tty !== undefined,
        abortSignal: s,
      } as Docker.ExecCreateOptions),
    signal,
  );
  const stream = await startStream(exec, withStdin, tty, signal);
  const resize = (cols: number, rows: number) => exec.resize({ h: rows, w: cols, abortSignal: bounded(undefined, 5_000) } as object);
  // Engines before API 1.42 (Debian's docker.io among them) ignore the start-time console size:
  // set it once the exec runs, before any input reaches the command (which may ask for the size).
  if (tty) await resize(tty.cols, tty.rows).catch(() => undefined);
  const pumps: Pump[] = [];
  if (live) {
    pumps.push(pumpStdin(spec.stdin as AsyncIterable<Uint8Array>, stream as Duplex));
  } else if (withStdin) {
    // Half-close after the bytes: the command sees EOF, the output side stays open.
    const bytes = spec.stdin as Uint8Array;
    (stream as Duplex).end(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  }
  if (spec.controls) {
    pumps.push(
      consumeControls(spec.controls, async (c: ExecControl) => {
        if (c.type === 'resize') {
          if (tty) await resize(c.cols, c.rows);
        } else if (tty && withStdin && TERMINAL_KEYS[c.signal] && !(stream as Duplex).writableEnded && !stream.destroyed) {
          (stream as Duplex).write(TERMINAL_KEYS[c.signal]!);
        } else if (c.signal === 'SIGKILL') {
          // The repeated passes also catch processes forked meanwhile.
          await killMarked(docker, runtimeId, exec, marker, spec.user);
        } else {
          await signalMarked(docker, runtimeId, exec, marker, c.signal, spec.user);
        }
      }),
    );
  }

  let killing: Promise<void> | undefined;
  const killTree = () => {
    killing ??= killMarked(docker, runtimeId, exec, marker, spec.user).finally(() => {
      const t = setTimeout(() => stream.destroy(), KILL_GRACE_MS);
      stream.once('close', () => clearTimeout(t));
    });
    return killing;
  };
  signal.addEventListener('abort', killTree, { once: true });
  // An abort that landed while the exec was being created or started has no event left to fire.
  if (signal.aborted) void killTree();
  let done = false;
  try {
    let first = true;
    try {
      const frames = tty ? rawFrames(stream as AsyncIterable<Uint8Array>) : demux(stream as AsyncIterable<Uint8Array>);
      for await (const frame of frames) {
        if (signal.aborted) break;
        if (first) {
          first = false;
          const head = frame.stream === 'stdout' ? Buffer.from(frame.data.subarray(0, 4096)).toString('utf8') : '';
          if (BAD_WORKDIR.test(head)) {
            for await (const _ of frames) void _;
            if ((await exitCodeOf(exec, signal)) === 126) {
              done = true;
              throw badRequest(`workdir ${workdir} is not an existing directory in the sandbox`);
            }
          } else if (head.startsWith('OCI runtime exec failed')) {
            // The command could not be started: sbx's own message and code, never the runtime's text.
            let failure = execFailure(execArgv(spec)[0]!, head.replace(/[\r\n]+$/, ''));
            const rest: Frame[] = [];
            for await (const f of frames) rest.push(f);
            if (failure && rest.length === 0 && (await exitCodeOf(exec, signal)) === 126) {
              done = true;
              // Nothing ran, so running again is safe; live stdin may already be partly consumed.
              if (options.lookupFailed) failure = options.lookupFailed;
              else if (spec.mode === 'argv' && !spec.command.includes('/') && !live && PATH_REFUSED.test(head)) {
                const search = { ...spec, command: '/bin/sh', args: ['-c', PATH_SEARCH, 'sbx', spec.command, ...spec.args] };
                yield* streamExec(docker, runtimeId, search, signal, { ...options, lookupFailed: failure });
                return;
              }
              const data = Buffer.from(failure.stderr);
              options.onOutput?.('stderr', data);
              yield { stream: 'stderr', data };
              yield { stream: 'exit', exit_code: failure.exitCode };
              return;
            }
            for (const f of [frame, ...rest]) {
              options.onOutput?.(f.stream, f.data);
              yield { stream: f.stream, data: f.data };
            }
            continue;
          }
        }
        options.onOutput?.(frame.stream, frame.data);
        yield { stream: frame.stream, data: frame.data };
      }
    } catch (err) {
      // A stream cut by our own kill is the expected end of an aborted exec.
      if (!signal.aborted || isSbxError(err)) throw err;
    }
    if (signal.aborted) {
      await killTree();
      done = true;
      return;
    }
    const exitCode = await exitCodeOf(exec, signal);
    done = true;
    yield { stream: 'exit', exit_code: exitCode };
  } finally {
    for (const p of pumps) p.stop();
    signal.removeEventListener('abort', killTree);
    if (!done) {
      // The consumer stopped early: nobody will read the output, so nothing may keep running.
      void killTree().catch(() => undefined);
    }
    if (!stream.destroyed && done) stream.destroy();
  }
}

/**
 * Starts the exec's output stream. No AbortSignal goes to the request: node would destroy the
 * response whenever it fired, cutting a long quiet command. Only the wait for the engine's answer
 * is bounded; an abort after that is handled by killing the command.
 */
async function startStream(exec: Docker.Exec, withStdin: boolean, tty: ExecSpec['tty'], signal: AbortSignal): Promise<Readable | Duplex> {
  const opts: Record<string, unknown> = { hijack: withStdin, stdin: withStdin, Detach: false, Tty: tty !== undefined };
  if (tty) opts.ConsoleSize = [tty.rows, tty.cols];
  const started = exec.start(opts as Docker.ExecStartOptions) as Promise<Readable | Duplex>;
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SbxError('timeout', 'exec: docker engine did not answer in time')), API_TIMEOUT_MS);
  });
  try {
    return await Promise.race([started, limit]);
  } catch (err) {
    // If the engine answers after all, nobody reads that stream: close it.
    started.then(
      (s) => s.destroy(),
      () => undefined,
    );
    if (signal.aborted && isAbortError(err)) throw err;
    throw toSbxError(err, 'exec');
  } finally {
    clearTimeout(timer);
  }
}

/** Waits until the exec's process runs; false when it already ended. */
async function whenRunning(exec: Docker.Exec): Promise<boolean> {
  // An abort can race the engine starting the process: wait until it runs (or already ended).
  for (let i = 0; i < 40; i++) {
    const info = await exec.inspect({ abortSignal: bounded(undefined, 5_000) });
    if (!info.Running && typeof info.ExitCode === 'number') return false;
    if (info.Running && info.Pid > 0) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

/** Sends `sig` once to every process of the exec (found by its environment marker). */
async function signalMarked(
  docker: Docker,
  runtimeId: string,
  exec: Docker.Exec,
  marker: string,
  sig: ExecSignal,
  user?: ExecUser,
): Promise<void> {
  try {
    if (!(await whenRunning(exec))) return;
    await runHelper(docker, runtimeId, [SIGNALLER, 'sbx-signal', marker, sig.replace(/^SIG/, '')], user);
  } catch {
    // Container gone or engine down: nothing left to signal.
  }
}

type ExecUser = ExecSpec['user'];

/**
 * Runs a helper script in the container (not marked, so never its own target) to its end; as the
 * command's own user when it has one (a pool tenant): the same uid may signal its processes
 * without any capability.
 */
async function runHelper(docker: Docker, runtimeId: string, script: string[], user?: ExecUser): Promise<void> {
  const helper = await docker.getContainer(runtimeId).exec({
    Cmd: ['/bin/sh', '-c', ...script],
    ...(user ? { User: `${user.uid}:${user.gid}` } : {}),
    AttachStdout: true,
    AttachStderr: true,
    abortSignal: bounded(undefined, 10_000),
  } as Docker.ExecCreateOptions);
  const out = (await helper.start({
    Detach: false,
    Tty: false,
    abortSignal: bounded(undefined, 10_000),
  } as Docker.ExecStartOptions)) as Readable;
  // Draining to the end means the helper has done its work.
  for await (const _ of out) void _;
}

/** Kills every process of the exec (found by its environment marker) once it has started. */
async function killMarked(docker: Docker, runtimeId: string, exec: Docker.Exec, marker: string, user?: ExecUser): Promise<void> {
  try {
    if (!(await whenRunning(exec))) return;
    await runHelper(docker, runtimeId, [KILLER, 'sbx-kill', marker], user);
  } catch {
    // Container gone or engine down: nothing left to kill from here.
  }
}

/**
 * Kills every process carrying `marker` (`SBX_EXEC_ID=…`) through the engine: what is left of a
 * command whose agent died under it (agent.ts). Best effort.
 */
export async function killMarkedViaEngine(docker: Docker, runtimeId: string, marker: string, user?: ExecUser): Promise<void> {
  try {
    await runHelper(docker, runtimeId, [KILLER, 'sbx-kill', marker], user);
  } catch {
    // Container gone or engine down: nothing left to kill from here.
  }
}

/** Exit code from exec inspect; the stream can end a moment before the engine records it. */
async function exitCodeOf(exec: Docker.Exec, signal: AbortSignal): Promise<number> {
  for (let i = 0; i < 40; i++) {
    const info = await call('exec', (s) => exec.inspect({ abortSignal: s }), signal);
    if (!info.Running && typeof info.ExitCode === 'number') return info.ExitCode;
    await new Promise((r) => setTimeout(r, 25));
  }
  return -1;
}
