import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, fstatSync, openSync, readlinkSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, readlink, rm } from 'node:fs/promises';
import { providerError } from '../../../core/errors.js';
import type { Freezer } from './freezer.js';
import type { HostMarkers } from './host-markers.js';
import type { Isolation } from './isolation.js';

/**
 * One PID namespace per sandbox (DESIGN.md §10): a keeper is its init, and every exec of the
 * sandbox enters it (nsenter), so what an exec leaves running (`server &`, `setsid … &`, `nohup`)
 * lives on after it, visible to the next exec, until it ends or the sandbox is destroyed; the host,
 * `sbx serve` and other sandboxes stay invisible. A pool workspace has a namespace of its own.
 *
 * The keeper is tied to `sbx serve`: its launcher dies with the server (PR_SET_PDEATHSIG), the init
 * dies with its launcher (`unshare --kill-child`) and also ends when its stdin — a pipe only the
 * server holds — reaches EOF; with the init the kernel kills the whole namespace. Each keeper is
 * also recorded (host-markers.ts), so a start kills what a killed server left before serving.
 */

/** The init (mock): reaps what is reparented to it, ends when the server's end of its stdin closes. */
const KEEPER_SCRIPT = 'exec 3<&0; cat <&3 >/dev/null 3<&- & exec 3<&- </dev/null; echo ready; wait $!';
const START_TIMEOUT_MS = 5_000;
const STOP_WAIT_MS = 3_000;
/** Descriptors that carry the namespaces to nsenter (the guest wrapper closes them). */
export const NS_FD_BASE = 5;

/** Where a guest keeper sees its control directory (HostMarkers.ctlDir). */
export const CTL_GUEST = '/.sbx';

/**
 * The keeper of a tracer's sandbox (proot): the tracer is the namespace's init, so nothing in the
 * sandbox can kill it and leave its tracees running untraced; this guest sh under it starts every
 * exec, so what an exec leaves running stays traced and path-translated. It reads exec names from
 * the request FIFO; each names a directory of FIFOs (stdin, stdout, stderr, status) and the
 * script to source (GuestExec). When the server's end of its stdin closes, it kills everything.
 */
const GUEST_KEEPER = [
  'exec 9<&0 </dev/null',
  '{ cat <&9 >/dev/null; kill -9 -1; } &',
  `exec 9<&- 7<>${CTL_GUEST}/req`,
  'echo ready',
  'exec >/dev/null 2>&1',
  'while IFS= read -r d <&7; do',
  "  case $d in ''|*[!A-Za-z0-9._-]*) continue ;; esac",
  `  ( cd "${CTL_GUEST}/$d" && exec /bin/sh -c '. ./cmd' sbx <in >out 2>err 3>st 7<&- ) &`,
  'done',
].join('\n');

/**
 * The host side of one exec through a guest keeper, run in the namespace in the control
 * directory: makes the exec's FIFOs, takes the script from fd 4, relays the FIFOs to its own
 * stdio and the status FIFO to fd 3, asks the keeper to start it, and ends when all are closed.
 */
export const GUEST_EXEC_LAUNCHER = [
  'd=$1; mkdir -m 700 "$d" && cd "$d" && mkfifo -m 600 in out err st || exit 1',
  'cat <&4 >cmd; exec 4<&-',
  'cat out & cat err >&2 & cat st >&3 &',
  'exec 3>&-',
  'echo "$d" >../req',
  'cat >in 2>/dev/null',
  'exec 0<&-',
  'wait',
].join('\n');

/** How a keeper whose init is a tracer starts (proot). */
export interface GuestLaunch {
  /** argv that runs `guest` in the sandbox under the tracer, with `ctl` bound at CTL_GUEST. */
  argv(ctl: string, guest: string[]): Promise<string[]>;
  env: Record<string, string>;
  cwd: string;
}

interface Keeper {
  child: ChildProcess;
  pid: number;
  /** Open namespace files: pid (for children), mount, and the user namespace when there is one. */
  fds: number[];
  /** `pid:[inode]` of the namespace, as /proc/<pid>/ns/pid reads for its processes. */
  pidNs: string;
  /** A guest keeper's control directory (GuestLaunch). */
  ctl?: string;
  /** The guest keeper's host pid and start time. */
  guestKeeper?: { pid: number; start: string };
  exited: Promise<void>;
}

/** How an exec enters a keeper's namespaces: the argv before its command, the fds to pass from NS_FD_BASE on. */
export interface Entry {
  argv: string[];
  fds: number[];
  pidNs: string;
  ctl?: string;
}

export class Keepers {
  private readonly live = new Map<string, Promise<Keeper>>();

  /** `freezer`: the keeper and every exec join the runtime's freezer cgroup first (DESIGN.md §16). */
  constructor(
    private readonly markers: HostMarkers,
    private readonly freezer?: Freezer,
  ) {}

  private static key(runtimeId: string, ns: string): string {
    return `${runtimeId}\0${ns}`;
  }

  /** argv prefix (and fds) that runs a command in the namespace of runtime `runtimeId` (`ns`: a pool workspace). */
  async enter(iso: Isolation, runtimeId: string, ns: string, cwd: string | null, guest?: GuestLaunch): Promise<Entry> {
    const k = await this.ensure(iso, runtimeId, ns, guest);
    const fd = (i: number) => `/proc/self/fd/${NS_FD_BASE + i}`;
    const user = iso.userns ? [`--user=${fd(2)}`, '--preserve-credentials'] : [];
    const wd = cwd ?? k.ctl ?? '/';
    const inner = [iso.nsenter, ...user, `--pid=${fd(0)}`, `--mount=${fd(1)}`, `--wd=${wd}`, '--', ...iso.enter];
    const argv = this.freezer ? this.freezer.wrap(runtimeId, inner) : inner;
    return { argv, fds: k.fds, pidNs: k.pidNs, ...(k.ctl ? { ctl: k.ctl } : {}) };
  }

  private ensure(iso: Isolation, runtimeId: string, ns: string, guest?: GuestLaunch): Promise<Keeper> {
    const key = Keepers.key(runtimeId, ns);
    let p = this.live.get(key);
    if (!p) {
      p = this.start(iso, runtimeId, ns, guest);
      this.live.set(key, p);
      p.then(
        (k) =>
          void k.exited.then(() => {
            if (this.live.get(key) === p) this.live.delete(key);
          }),
        () => {
          if (this.live.get(key) === p) this.live.delete(key);
        },
      );
    }
    return p;
  }

  private async start(iso: Isolation, runtimeId: string, ns: string, guest?: GuestLaunch): Promise<Keeper> {
    let argv = [...iso.prefix, '/bin/sh', '-c', KEEPER_SCRIPT];
    let ctl: string | undefined;
    if (guest) {
      ctl = this.markers.ctlDir(runtimeId, ns);
      await rm(ctl, { recursive: true, force: true });
      await mkdir(ctl, { recursive: true, mode: 0o700 });
      const inner = await guest.argv(ctl, ['/bin/sh', '-c', GUEST_KEEPER]);
      argv = [...iso.prefix, '/bin/sh', '-c', 'mkfifo -m 600 "$0/req" && exec "$@"', ctl, ...inner];
    }
    if (this.freezer) argv = this.freezer.wrap(runtimeId, argv);
    // Its own process group (a marker kills it by group); nothing of the server's environment.
    const child = spawn(argv[0]!, argv.slice(1), {
      detached: true,
      cwd: guest?.cwd ?? '/',
      env: guest?.env ?? { PATH: '/usr/bin:/bin' },
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    child.stdin!.on('error', () => undefined);
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    const fail = (why: string) => {
      killGroup(child);
      return providerError(`the sandbox's process namespace could not be started (${why})`);
    };
    const ready = await new Promise<string | null>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), START_TIMEOUT_MS);
      child.once('error', () => resolve('spawn failed'));
      child.once('exit', () => resolve('it exited'));
      child.stdout!.once('data', () => resolve(null));
      void exited.then(() => clearTimeout(timer));
      child.stdout!.once('data', () => clearTimeout(timer));
    });
    if (ready !== null || child.pid === undefined) throw fail(ready ?? 'no pid');
    child.stdout!.resume();
    const pid = child.pid;
    // Opened while the launcher is our unreaped child (reaping happens on the event loop, not
    // within this synchronous block), so the pid cannot name another process.
    const fds: number[] = [];
    let pidNs = '';
    try {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error('exited');
      for (const n of ['pid_for_children', 'mnt', ...(iso.userns ? ['user'] : [])]) fds.push(openSync(`/proc/${pid}/ns/${n}`, 'r'));
      pidNs = readlinkSync(`/proc/${pid}/ns/pid_for_children`);
      // Never the server's own namespace (the launcher must already have made its own).
      if (fstatSync(fds[0]!).ino === statSync('/proc/self/ns/pid').ino) throw new Error('not unshared yet');
    } catch (err) {
      for (const fd of fds) closeSync(fd);
      throw fail((err as Error).message);
    }
    void exited.then(() => {
      for (const fd of fds) closeSync(fd);
      void this.markers.removeProc(runtimeId, `keeper.${pid}`);
      if (ctl) void rm(ctl, { recursive: true, force: true }).catch(() => undefined);
    });
    // Not a reason for the server to stay up: it dies with the server anyway.
    child.unref();
    (child.stdout as unknown as { unref?: () => void }).unref?.();
    (child.stdin as unknown as { unref?: () => void }).unref?.();
    await this.markers.addProc(runtimeId, `keeper.${pid}`, pid);
    const guestKeeper = guest ? await findGuestKeeper(pidNs) : null;
    return { child, pid, fds, pidNs, exited, ...(ctl ? { ctl } : {}), ...(guestKeeper ? { guestKeeper } : {}) };
  }

  /**
   * Whether the guest keeper of the namespace still runs: the sandbox can kill it (only itself
   * suffers: its execs could not start). No keeper known: true.
   */
  async guestAlive(runtimeId: string, ns: string): Promise<boolean> {
    const k = await this.live.get(Keepers.key(runtimeId, ns))?.catch(() => null);
    if (!k?.guestKeeper) return true;
    return (await procStart(k.guestKeeper.pid)) === k.guestKeeper.start;
  }

  /** Ends the namespace (and everything in it) of `ns`, or of every namespace of the runtime; waits (bounded). */
  async stop(runtimeId: string, ns?: string): Promise<void> {
    const prefix = Keepers.key(runtimeId, '');
    const keys = [...this.live.keys()].filter((k) => (ns === undefined ? k.startsWith(prefix) : k === Keepers.key(runtimeId, ns)));
    await Promise.all(
      keys.map(async (key) => {
        const k = await this.live.get(key)!.catch(() => null);
        this.live.delete(key);
        if (!k) return;
        killGroup(k.child);
        await Promise.race([k.exited, new Promise((r) => setTimeout(r, STOP_WAIT_MS).unref())]);
      }),
    );
  }

  /**
   * Host pids of every process in the runtime's namespaces (all of them, pool workspaces too): what
   * the freezer adopts around a pause, so nothing of the sandbox runs on outside its cgroup.
   */
  async pids(runtimeId: string): Promise<number[]> {
    const prefix = Keepers.key(runtimeId, '');
    const nss = new Set<string>();
    for (const [key, p] of this.live) {
      if (!key.startsWith(prefix)) continue;
      const k = await p.catch(() => null);
      if (k) nss.add(k.pidNs);
    }
    if (nss.size === 0) return [];
    const out: number[] = [];
    for (const pid of await readdir('/proc').catch(() => [] as string[])) {
      if (!/^\d+$/.test(pid)) continue;
      if (nss.has(await readlink(`/proc/${pid}/ns/pid`).catch(() => ''))) out.push(Number(pid));
    }
    return out;
  }

  /**
   * Whether the TCP sockets listening on `port` (this host's network, which mock and proot share)
   * all belong to processes of the namespace: at least one listens, and none of another's.
   */
  async listenerOwned(runtimeId: string, ns: string, port: number): Promise<boolean> {
    const k = await this.live.get(Keepers.key(runtimeId, ns))?.catch(() => null);
    if (!k) return false;
    const wanted = await listeningInodes(port);
    if (wanted.size === 0) return false;
    for (const pid of await readdir('/proc').catch(() => [] as string[])) {
      if (!/^\d+$/.test(pid)) continue;
      if ((await readlink(`/proc/${pid}/ns/pid`).catch(() => '')) !== k.pidNs) continue;
      for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
        const m = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
        if (m) wanted.delete(m[1]!);
      }
      if (wanted.size === 0) return true;
    }
    return false;
  }
}

/** Start time (ticks after boot) of a host process, or null. */
async function procStart(pid: number): Promise<string | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return stat && f.length > 19 ? f[19]! : null;
}

/** The guest keeper (GUEST_KEEPER) in namespace `pidNs`: host pid and start time (not its forked helper). */
async function findGuestKeeper(pidNs: string): Promise<{ pid: number; start: string } | null> {
  const head = `/bin/sh\0-c\0${GUEST_KEEPER.slice(0, 18)}`;
  const found = new Map<number, number>();
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    if ((await readlink(`/proc/${pid}/ns/pid`).catch(() => '')) !== pidNs) continue;
    if (!(await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).startsWith(head)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    found.set(Number(pid), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
  }
  for (const [pid, ppid] of found) {
    if (found.has(ppid)) continue;
    const start = await procStart(pid);
    if (start) return { pid, start };
  }
  return null;
}

/** The host pid of the process that is `nsPid` in the namespace `pidNs` (`pid:[inode]`), or null. */
export async function hostPidIn(pidNs: string, nsPid: number): Promise<number | null> {
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    if ((await readlink(`/proc/${pid}/ns/pid`).catch(() => '')) !== pidNs) continue;
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    const ids = /^NSpid:\s*(.*)$/m.exec(status)?.[1]?.trim().split(/\s+/);
    if (ids && Number(ids[ids.length - 1]) === nsPid) return Number(pid);
  }
  return null;
}

/** Inodes of the TCP sockets in LISTEN state on `port`, IPv4 and IPv6 (Linux /proc/net). */
async function listeningInodes(port: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    const text = await readFile(file, 'utf8').catch(() => '');
    for (const line of text.split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '0A') continue;
      if (Number.parseInt(f[1]!.split(':')[1] ?? '', 16) === port) out.add(f[9]!);
    }
  }
  return out;
}

function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}
