/**
 * The shell scripts that run a detached background process inside a sandbox (DESIGN.md §10) and
 * follow it. They need `sh`, `setsid`, `tail`, `kill`, `sleep`, `cat`, `mkdir` and `mv` in the
 * image (busybox has them all). Everything spliced in is either generated here (the process id,
 * byte counts) or shell-quoted, so nothing a caller sends is parsed by the outer script.
 *
 * Layout in the sandbox: `/tmp/.sbx-processes/<id>/` holds `pid` (the process group leader),
 * `out` and `err` (its output), and `exit` (its status, written when it ends).
 */
import type { ExecSpec, Provider } from '../ports/index.js';
import { concat } from './exec.js';
import { shellQuote as quote } from '../../shared/shell.js';

/** Bound on the short helper execs (launch, drain, status, signal) in a detached process's sandbox. */
const SCRIPT_TIMEOUT_MS = 30_000;

const ROOT = '/tmp/.sbx-processes';

export function processDir(id: string): string {
  if (!/^p-[a-z0-9]+$/.test(id)) throw new Error(`not a process id: ${id}`);
  return `${ROOT}/${id}`;
}

/**
 * Starts `argv` in a new session with no terminal and stdin from /dev/null, then answers at once.
 * The wrapper traps the catchable signals (a handler, not an ignore, so the command gets them with
 * their default action) and records the command's status when it ends; a SIGKILL of the whole
 * group leaves no status, which reads as killed. Exit 120: the directory cannot be made.
 */
export function launchScript(id: string, argv: readonly string[]): string {
  const d = quote(processDir(id));
  const wrapper =
    'd=$1; shift; trap : INT TERM HUP QUIT USR1 USR2; "$@" </dev/null >"$d/out" 2>"$d/err"; echo $? ' +
    '>"$d/exit.tmp"; mv "$d/exit.tmp" "$d/exit"';
  return [
    `mkdir -p ${ROOT} 2>/dev/null; mkdir -m 700 ${d} || exit 120`,
    `: >${d}/out; : >${d}/err`,
    `setsid sh -c ${quote(wrapper)} sbx-process ${d} ${argv.map(quote).join(' ')} </dev/null >/dev/null 2>&1 &`,
    `echo $! >${d}/pid`,
  ].join('\n');
}

/**
 * Streams the output files from the given byte counts (stdout to stdout, stderr to stderr) until
 * the process has ended, then stops. What the followers had not yet copied is read by `drainScript`.
 */
export function followScript(id: string, from: { stdout: number; stderr: number }): string {
  const d = quote(processDir(id));
  return [
    `tail -c +${from.stdout + 1} -f ${d}/out & a=$!`,
    `tail -c +${from.stderr + 1} -f ${d}/err >&2 & b=$!`,
    `p=$(cat ${d}/pid 2>/dev/null)`,
    `while [ ! -e ${d}/exit ] && [ -n "$p" ] && kill -0 "$p" 2>/dev/null; do sleep 0.5 2>/dev/null || sleep 1; done`,
    'kill $a $b 2>/dev/null; wait 2>/dev/null; exit 0',
  ].join('\n');
}

/** The rest of both files from the given counts, at once (no following). */
export function drainScript(id: string, from: { stdout: number; stderr: number }): string {
  const d = quote(processDir(id));
  return `tail -c +${from.stdout + 1} ${d}/out; tail -c +${from.stderr + 1} ${d}/err >&2; exit 0`;
}

/**
 * Prints the process's status: `exit N` once it ended, `running` while its group leader lives,
 * `gone` when it vanished without a status (killed, or the sandbox restarted).
 */
export function statusScript(id: string): string {
  const d = quote(processDir(id));
  return (
    `if [ -e ${d}/exit ]; then echo "exit $(cat ${d}/exit)"; elif p=$(cat ${d}/pid 2>/dev/null) && kill ` +
    `-0 "$p" 2>/dev/null; then echo running; else echo gone; fi`
  );
}

/** Sends a signal to every process of the group. */
export function signalScript(id: string, signal: string): string {
  if (!/^[A-Z0-9]+$/.test(signal)) throw new Error(`not a signal name: ${signal}`);
  const d = quote(processDir(id));
  return (
    `p=$(cat ${d}/pid 2>/dev/null) && [ -n "$p" ] && kill -s ${signal} -- "-$p" 2>/dev/null || kill -s ` +
    `${signal} "$p" 2>/dev/null; exit 0`
  );
}

export function cleanupScript(id: string): string {
  return `rm -rf ${quote(processDir(id))}`;
}

/** A helper script as an exec spec (shell mode, no env of its own). */
export function shellSpec(script: string): ExecSpec {
  return { command: script, args: [], mode: 'shell', env: {} };
}

/** Runs a short helper script to its end (bounded) and collects its output. */
export async function runScript(
  provider: Provider,
  runtimeId: string,
  script: string,
  extra: { env?: Record<string, string>; workdir?: string } = {},
): Promise<{ code: number; stdout: string }> {
  const spec: ExecSpec = { ...shellSpec(script), env: extra.env ?? {}, ...(extra.workdir !== undefined ? { workdir: extra.workdir } : {}) };
  let code = -1;
  const out: Uint8Array[] = [];
  for await (const ev of provider.exec(runtimeId, spec, AbortSignal.timeout(SCRIPT_TIMEOUT_MS))) {
    if (ev.stream === 'exit') code = ev.exit_code;
    else if (ev.stream === 'stdout' && out.length < 64) out.push(ev.data);
  }
  return { code, stdout: new TextDecoder().decode(concat(out)) };
}
