import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { SbxError } from '../../../core/errors.js';
import { shellQuote } from '../../../shared/shell.js';

/**
 * Process isolation for host-backed providers (mock, proot): each sandbox has one PID namespace
 * with its own /proc (a keeper process is its init, keeper.ts) that every exec of the sandbox
 * enters, so it neither sees nor signals `sbx serve`, other sandboxes or any other host process,
 * and cannot read their environments. Built from util-linux `unshare` and `nsenter` (and
 * `setpriv`); where the host allows no namespace, commands run unisolated and health says so.
 */
export interface Isolation {
  /** True when commands run in their own PID namespace. */
  isolated: boolean;
  /** argv prefix that runs the argv after it as the init of a new PID namespace; empty when unisolated. */
  prefix: string[];
  /** nsenter's path (a process entering a keeper's namespaces); empty when unisolated. */
  nsenter: string;
  /** The namespace is owned by a user namespace of its own, which an entering process joins too. */
  userns: boolean;
  /** argv prefix an entering process runs its command under (drops what the init dropped). */
  enter: string[];
  /** How it is isolated, or why not (for health and logs; no secrets, no host paths of data). */
  note: string;
}

const PROBE_TIMEOUT_MS = 5_000;

/** Absolute path of `name` on the server's PATH, or null. */
export function findOnPath(name: string): string | null {
  for (const dir of (process.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin').split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // next
    }
  }
  return null;
}

type Candidate = Omit<Isolation, 'isolated'>;

function candidates(): Candidate[] {
  const unshare = findOnPath('unshare');
  const nsenter = findOnPath('nsenter');
  if (!unshare || !nsenter) return [];
  const setpriv = findOnPath('setpriv');
  // The leader dies with the server (no exec tree outlives a crash unseen); its child, the
  // namespace init, dies with the leader (--kill-child), and with the init the whole namespace.
  const deathSig = setpriv ? [setpriv, '--pdeathsig', 'KILL'] : [];
  const base = ['--pid', '--fork', '--mount-proc', '--kill-child'];
  const out: Candidate[] = [];
  if (process.getuid?.() === 0 && setpriv) {
    // Root: no user namespace (every uid stays mapped), but without CAP_SYS_ADMIN, so a command
    // cannot unmount the namespace's /proc to uncover the host's (nor enter another namespace).
    const drop = [setpriv, '--bounding-set', '-sys_admin'];
    out.push({ prefix: [...deathSig, unshare, ...base, ...drop], nsenter, userns: false, enter: drop, note: 'own PID namespace' });
  }
  // Unprivileged: a user namespace owns the PID namespace; commands keep the server's uid and
  // have no capabilities outside it.
  const user = { nsenter, userns: true, enter: [], note: 'own user and PID namespace' };
  out.push({ prefix: [...deathSig, unshare, '--user', '--map-current-user', ...base], ...user });
  out.push({ prefix: [...deathSig, unshare, '--user', '--map-root-user', ...base], ...user });
  return out;
}

function runsAsInit(prefix: string[]): Promise<boolean> {
  return new Promise((resolve) => {
    execFile(
      prefix[0]!,
      [...prefix.slice(1), '/bin/sh', '-c', 'echo $$; ls /proc'],
      { timeout: PROBE_TIMEOUT_MS, env: { PATH: '/usr/bin:/bin' } },
      (err, stdout) => {
        if (err) return resolve(false);
        const lines = String(stdout).split('\n');
        // PID 1, and its /proc shows its own namespace only (not the server's pid).
        resolve(lines[0] === '1' && !lines.includes(String(process.pid)));
      },
    );
  });
}

let probed: Promise<Isolation> | null = null;

/** Finds, once per process, how this host can isolate commands. Never rejects. */
export function probeIsolation(): Promise<Isolation> {
  probed ??= (async () => {
    const none = { isolated: false, prefix: [], nsenter: '', userns: false, enter: [] };
    if (process.platform !== 'linux') return { ...none, note: 'PID namespaces need Linux' };
    const list = candidates();
    if (list.length === 0) return { ...none, note: 'util-linux unshare and nsenter are not installed' };
    for (const c of list) {
      if (await runsAsInit(c.prefix)) return { isolated: true, ...c };
    }
    return { ...none, note: 'this host allows no PID namespace (unshare failed)' };
  })();
  return probed;
}

/** The health warning of a provider whose commands run without a PID namespace. */
export function unisolatedWarning(iso: Isolation): string | undefined {
  if (iso.isolated) return undefined;
  return `commands are not isolated from host processes (${iso.note}): a sandbox can see and signal sbx and other sandboxes' processes`;
}

// ---------------------------------------------------------------- guest environment

/**
 * Names that act on the host-side programs (dynamic linker, libc, proot itself) before the guest
 * runs. They travel renamed (`SBX_GUEST_<name>`) and the guest wrapper restores them.
 */
const HOST_SENSITIVE =
  /^(?:LD_|PROOT_|GLIBC_|MALLOC_|SBX_GUEST_)|^(?:GCONV_PATH|LOCPATH|NLSPATH|TMPDIR|HOSTALIASES|RES_OPTIONS|LOCALDOMAIN|TZDIR|GETCONF_DIR)$/;
const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * The environment of the host process that starts a guest: the guest env itself (never in argv,
 * never the server's own environment), with host-sensitive names renamed for the wrapper.
 */
export function launcherEnv(guest: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  const renamed: string[] = [];
  for (const [k, v] of Object.entries(guest)) {
    if (!HOST_SENSITIVE.test(k)) {
      env[k] = v;
    } else if (SHELL_NAME.test(k)) {
      env[`SBX_GUEST_${k}`] = v;
      renamed.push(k);
    }
    // A host-sensitive name that is no shell name cannot be restored: it is dropped.
  }
  // Shorter first: N is restored from SBX_GUEST_N before a guest name SBX_GUEST_N overwrites it.
  env.SBX_GUEST_RENAMED = renamed.sort((a, b) => a.length - b.length).join(' ');
  return env;
}

/**
 * A script that runs `argv` in `workdir` with the guest env, for a guest keeper to source
 * (keeper.ts): it first says its pid on fd 3, then sets the env by `export` (never argv; names a
 * shell cannot set are dropped) and replaces itself with `argv` (the wrapper).
 */
export function guestScript(workdir: string, guest: Record<string, string>, argv: readonly string[]): string {
  const lines = ['echo "p $$" >&3', `cd ${shellQuote(workdir)} || { echo 1 >&3; exit 1; }`];
  for (const [k, v] of Object.entries(launcherEnv(guest))) if (SHELL_NAME.test(k)) lines.push(`export ${k}=${shellQuote(v)}`);
  lines.push(`exec ${argv.map(shellQuote).join(' ')}`);
  return `${lines.join('\n')}\n`;
}

/**
 * POSIX sh run as `sh -c WRAPPER sbx MODE COMMAND ARGS…` where the command runs (on the host for
 * mock, inside the guest for proot). It restores renamed variables, survives the signals sent to
 * the command (so it reports the command's 128 + signo), and in argv mode resolves COMMAND on
 * PATH itself, answering `sbx: command not found: NAME` (127) or `sbx: permission denied: NAME`
 * (126) exactly. Its own diagnostics go to /dev/null; the command's stderr is the real one.
 */
export const GUEST_WRAPPER = [
  // The wrapper survives the signals meant for the command; one that comes before the command
  // started is remembered and ends the command as it would have (128 + its number).
  "unset __sbx_s; trap '__sbx_s=130' INT; trap '__sbx_s=143' TERM; trap '__sbx_s=129' HUP; trap '__sbx_s=131' " +
    "QUIT; trap '__sbx_s=138' USR1; trap '__sbx_s=140' USR2",
  // Descriptors 5-7 carried the keeper's namespaces to nsenter (keeper.ts): never the command's.
  'exec 5<&- 6<&- 7<&- 4>&2 2>/dev/null',
  // As `sbx+status` the wrapper also writes its status on fd 3 (the tracer outlives the command
  // while what it left running lives; the exec ends with the command, not with the tracer).
  '__sbx_exit() { if [ "$0" = sbx+status ]; then echo "$1" >&3; fi; exit "$1"; }',
  '__sbx_l=$SBX_GUEST_RENAMED; unset SBX_GUEST_RENAMED',
  'for __sbx_n in $__sbx_l; do eval "$__sbx_n=\\$SBX_GUEST_$__sbx_n; export $__sbx_n; unset SBX_GUEST_$__sbx_n"; done',
  'unset __sbx_l __sbx_n',
  // Resolves $__sbx_c like execvp: the first executable regular file; else 126 if some match
  // exists but cannot be executed, else 127. Exits with the exact message when nothing runs.
  '__sbx_find() {',
  '  __sbx_p=; __sbx_d=',
  '  case $__sbx_c in',
  '  */*) if [ -f "$__sbx_c" ] && [ -x "$__sbx_c" ]; then __sbx_p=$__sbx_c; elif [ -e "$__sbx_c" ]; then __sbx_d=1; fi ;;',
  '  *) set -f; IFS=:',
  '    for __sbx_x in $PATH; do',
  '      [ -n "$__sbx_x" ] || __sbx_x=.',
  '      if [ -f "$__sbx_x/$__sbx_c" ] && [ -x "$__sbx_x/$__sbx_c" ]; then __sbx_p=$__sbx_x/$__sbx_c; break; ' +
    'elif [ -e "$__sbx_x/$__sbx_c" ]; then __sbx_d=1; fi',
  '    done',
  '    unset IFS; set +f ;;',
  '  esac',
  '  if [ -z "$__sbx_p" ]; then',
  '    if [ -n "$__sbx_d" ]; then printf "sbx: permission denied: %s\\n" "$__sbx_c" >&4; __sbx_exit 126; fi',
  '    printf "sbx: command not found: %s\\n" "$__sbx_c" >&4; __sbx_exit 127',
  '  fi',
  '}',
  '__sbx_m=$1; shift',
  'if [ "$__sbx_m" = argv ]; then',
  '  __sbx_c=$1; shift; __sbx_find',
  '  set -- "$__sbx_p" "$@"',
  'elif [ "$__sbx_m" = shell1 ]; then',
  // A shell command whose first word is a plain word: builtins, keywords and functions run as
  // the shell has them; a program must be found like in argv mode, or the exact message is given.
  '  __sbx_c=$1; shift',
  '  case $(command -v "$__sbx_c" 2>/dev/null) in */*|"") __sbx_find ;; esac',
  'fi',
  'unset __sbx_m __sbx_c __sbx_p __sbx_d __sbx_x',
  'if [ -n "$__sbx_s" ]; then __sbx_exit "$__sbx_s"; fi; unset __sbx_s',
  '( exec "$@" 2>&4 4>&- 3>&- )',
  '__sbx_exit $?',
].join('\n');

/** A shell-mode command that is one plain word (no quoting, expansion, assignment or operator). */
const PLAIN_WORD = /^[A-Za-z0-9_./+][A-Za-z0-9_./+-]*$/;

/**
 * argv (from /bin/sh on) that runs an exec under the wrapper: argv mode as `[command, ...args]`,
 * shell mode as `/bin/sh -c SCRIPT`. A shell-mode command that is one plain word gets the argv
 * mode's exact not-found and permission messages too; other shell scripts get the shell's own.
 */
export function wrapperArgv(
  mode: 'shell' | 'argv',
  command: string,
  args: readonly string[],
  script?: string,
  opts: { status?: boolean } = {},
): string[] {
  const head = ['/bin/sh', '-c', GUEST_WRAPPER, opts.status ? 'sbx+status' : 'sbx'];
  if (mode === 'argv') return [...head, 'argv', command, ...args];
  const sh = ['/bin/sh', '-c', script ?? command];
  return PLAIN_WORD.test(command) ? [...head, 'shell1', command, ...sh] : [...head, 'shell', ...sh];
}

/** proot and mock share the host's network (DESIGN §10): a spawn asking for a network of its own gets 501. */
export function refuseNetwork(provider: string, spec: { network?: string }): void {
  if (spec.network)
    throw new SbxError(
      'not_implemented',
      `${provider} sandboxes share the host's network: network "${spec.network}" needs the docker provider`,
    );
}
