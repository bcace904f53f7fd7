import { badRequest, isSbxError, SbxError } from '../../../core/errors.js';
import type { ExecControl, ExecEvent, ExecSpec } from '../../../core/ports/index.js';
import { checkEnv } from '../shared/exec-process.js';
import { launcherEnv, wrapperArgv } from '../shared/isolation.js';
import { isLiveStdin } from '../shared/live-input.js';
import { buildShellCommand } from '../../../shared/shell.js';
import type { Envd } from './envd.js';
import { toSbxError } from './errors.js';

/**
 * Exec through envd's `Process.Start` server stream. The command runs under sbx's guest wrapper
 * (`/bin/sh -c WRAPPER …`, shared/isolation.ts) for the exact not-found messages and 128+signo
 * codes. envd signals one process only (SIGTERM and SIGKILL) and has no process groups, so
 * signals and kills go to the command's whole process tree through a second process that walks
 * /proc (TREE_SIGNAL). stdin: `SendInput` per chunk, then `CloseStdin`.
 */

/** `sh -c TREE_SIGNAL sbx SIGNAL PID`: signals PID and its descendants (KILL: stops them first). */
export const TREE_SIGNAL = [
  'sig=$1; root=$2',
  'tree() {',
  // `read` rather than `$(cat …)`: no fork per process, so a kill stays quick on a busy /proc.
  '  all=$(for f in /proc/[0-9]*/stat; do read -r l < "$f" 2>/dev/null || continue; p=${f#/proc/}; ' +
    'p=${p%/stat}; t=${l##*) }; set -- $t; echo "$p $2"; done)',
  '  list=$root; queue=$root',
  '  while [ -n "$queue" ]; do next=',
  '    for q in $queue; do for c in $(echo "$all" | while read -r a b; do [ "$b" = "$q" ] && echo "$a"; done); ' +
    'do list="$list $c"; next="$next $c"; done; done',
  '    queue=$next',
  '  done',
  '}',
  'if [ "$sig" = KILL ]; then tree; kill -STOP $list 2>/dev/null; tree; kill -STOP $list 2>/dev/null; kill -KILL $list 2>/dev/null',
  'else tree; kill -s "$sig" $list 2>/dev/null; fi',
  'exit 0',
].join('\n');

/** Go's ProcessState status for a signal death ("signal: terminated") → signal number. */
const SIGNAL_NAMES: Record<string, number> = {
  hangup: 1,
  interrupt: 2,
  quit: 3,
  killed: 9,
  'user defined signal 1': 10,
  'user defined signal 2': 12,
  terminated: 15,
};

/** Exit code of an envd EndEvent: `exitCode` (absent = 0), a signal death (-1) as 128 + signo. */
export function exitCodeOf(end: { exitCode?: unknown; status?: unknown }): number {
  const code = typeof end.exitCode === 'number' ? end.exitCode : 0;
  if (code >= 0) return code;
  const m = typeof end.status === 'string' ? /^signal: (.+)$/.exec(end.status) : null;
  const n = m ? SIGNAL_NAMES[m[1]!] : undefined;
  return n ? 128 + n : 137;
}

/** Chunks of stdin sent per SendInput (base64 in JSON: keep messages modest). */
const INPUT_CHUNK = 64 * 1024;
/** How long an aborted or abandoned exec waits for envd's end event after the kill. */
const KILL_GRACE_MS = 2_000;

type ProcessEvent = {
  start?: { pid?: number };
  data?: { stdout?: string; stderr?: string; pty?: string };
  end?: { exitCode?: number; status?: string };
  keepalive?: unknown;
};

export async function* hostedExec(
  envd: Envd,
  id: string,
  spec: ExecSpec,
  signal: AbortSignal,
  onOutput?: (stream: 'stdout' | 'stderr', data: Uint8Array) => void,
): AsyncGenerator<ExecEvent, void, undefined> {
  if (spec.mode === 'argv' && spec.command.length === 0) throw badRequest('command is empty');
  checkEnv(spec.env);
  if (signal.aborted) return;
  const script = spec.mode === 'shell' ? buildShellCommand(spec.command, spec.args) : undefined;
  const argv = wrapperArgv(spec.mode, spec.command, spec.args, script);
  const ac = new AbortController();
  const hasStdin = spec.stdin !== undefined;
  const request = {
    process: { cmd: argv[0], args: argv.slice(1), envs: launcherEnv(spec.env), cwd: spec.workdir ?? '/workspace' },
    stdin: hasStdin,
  };
  let pid: number | undefined;
  let ended = false;
  let killing: Promise<void> | undefined;
  const kill = (): Promise<void> => {
    if (killing || pid === undefined || ended) return killing ?? Promise.resolve();
    const target = pid;
    killing = signalTree(envd, id, target, 'KILL')
      .catch(() =>
        envd.unary(id, 'process.Process/SendSignal', { process: { pid: target }, signal: 'SIGNAL_SIGKILL' }, 'kill').then(() => undefined),
      )
      .catch(() => undefined);
    return killing;
  };
  let graceTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    void kill();
    graceTimer = setTimeout(() => ac.abort(), KILL_GRACE_MS);
  };
  signal.addEventListener('abort', onAbort, { once: true });
  const stops: Array<() => void> = [];
  try {
    const events = await envd.stream(id, 'process.Process/Start', request, 'exec', ac.signal);
    for await (const raw of events) {
      const ev = ((raw as { event?: ProcessEvent } | null)?.event ?? {}) as ProcessEvent;
      if (ev.start && typeof ev.start.pid === 'number' && pid === undefined) {
        pid = ev.start.pid;
        if (signal.aborted) void kill();
        if (hasStdin) stops.push(feedStdin(envd, id, pid, spec.stdin!));
        if (spec.controls) stops.push(applyControls(envd, id, pid, spec.controls));
      } else if (ev.data) {
        const stream =
          ev.data.stdout !== undefined
            ? 'stdout'
            : ev.data.stderr !== undefined
              ? 'stderr'
              : ev.data.pty !== undefined
                ? 'stdout'
                : undefined;
        const b64 = ev.data.stdout ?? ev.data.stderr ?? ev.data.pty;
        if (!stream || typeof b64 !== 'string' || b64.length === 0) continue;
        const data = new Uint8Array(Buffer.from(b64, 'base64'));
        onOutput?.(stream, data);
        yield { stream, data };
      } else if (ev.end) {
        ended = true;
        yield { stream: 'exit', exit_code: exitCodeOf(ev.end) };
        return;
      }
    }
    if (!signal.aborted) throw new SbxError('provider_error', "exec: the sandbox ended the command's stream without its exit status");
  } catch (err) {
    // Our own end of an aborted exec: the iteration just stops.
    if (signal.aborted && !isSbxError(err)) return;
    if (signal.aborted && isSbxError(err) && err.code === 'timeout') return;
    throw toSbxError(err, 'exec');
  } finally {
    signal.removeEventListener('abort', onAbort);
    clearTimeout(graceTimer);
    for (const stop of stops) stop();
    // A consumer that stopped early (or a failure mid-stream): the command must not outlive it.
    if (!ended) await Promise.race([kill(), new Promise((r) => setTimeout(r, KILL_GRACE_MS))]);
    ac.abort();
  }
}

/** Sends a signal to a command's process tree through a helper process (envd signals one pid only). */
export async function signalTree(envd: Envd, id: string, pid: number, sig: string): Promise<void> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), 5_000);
  try {
    const req = { process: { cmd: '/bin/sh', args: ['-c', TREE_SIGNAL, 'sbx', sig, String(pid)], envs: {}, cwd: '/' }, stdin: false };
    const events = await envd.stream(id, 'process.Process/Start', req, 'signal', ac.signal);
    for await (const _ of events) {
      // Drained until the helper ends.
    }
  } finally {
    clearTimeout(timer);
  }
}

function feedStdin(envd: Envd, id: string, pid: number, stdin: Uint8Array | AsyncIterable<Uint8Array>): () => void {
  let stopped = false;
  const source: AsyncIterable<Uint8Array> = isLiveStdin(stdin)
    ? stdin
    : (async function* () {
        yield stdin;
      })();
  const it = source[Symbol.asyncIterator]();
  const send = async (chunk: Uint8Array) => {
    for (let off = 0; off < chunk.byteLength && !stopped; off += INPUT_CHUNK) {
      const part = Buffer.from(chunk.subarray(off, off + INPUT_CHUNK)).toString('base64');
      await envd.unary(id, 'process.Process/SendInput', { process: { pid }, input: { stdin: part } }, 'exec stdin');
    }
  };
  void (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done || stopped) break;
        await send(r.value);
      }
    } catch {
      // The command ended or stopped reading: its stdin just ends.
    } finally {
      if (!stopped) await envd.unary(id, 'process.Process/CloseStdin', { process: { pid } }, 'exec stdin').catch(() => undefined);
    }
  })();
  return () => {
    if (stopped) return;
    stopped = true;
    void it.return?.();
  };
}

function applyControls(envd: Envd, id: string, pid: number, controls: AsyncIterable<ExecControl>): () => void {
  let stopped = false;
  const it = controls[Symbol.asyncIterator]();
  void (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (r.done || stopped) break;
        // No terminal here: resize has nothing to act on.
        if (r.value.type === 'signal') await signalTree(envd, id, pid, r.value.signal.replace(/^SIG/, '')).catch(() => undefined);
      }
    } catch {
      // Controls end with the exec.
    }
  })();
  return () => {
    stopped = true;
    void it.return?.();
  };
}
