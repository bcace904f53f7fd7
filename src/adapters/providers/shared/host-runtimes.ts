import { randomBytes } from 'node:crypto';
import { mkdir, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { conflict, notFound, SbxError } from '../../../core/errors.js';
import type { ConsoleLog, ConsoleQuery, ExecEvent, RuntimeInfo, RuntimeStatus, WatchEvent } from '../../../core/ports/index.js';
import { ConsoleRing } from './console-ring.js';
import { execProcess, type ProcessSpec } from './exec-process.js';
import { HostFs } from './host-fs.js';
import { MountedFs, type HostMount } from './host-fs/mounted.js';
import { HostMarkers } from './host-markers.js';
import { hostWatch } from './host-watch.js';
import { Freezer } from './freezer.js';
import { Keepers } from './keeper.js';

/** Runtime ids name directories, so they must be plain names: no `/`, no `..`. */
const RUNTIME_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** True when `id` can safely name a runtime directory. */
export function isRuntimeId(id: string): boolean {
  return RUNTIME_ID_RE.test(id) && !id.includes('..');
}

/**
 * Bookkeeping shared by providers whose runtimes are host directories (`<workDir>/<runtime_id>`):
 * file access, console rings, running commands (killed on destroy) and the inventory. Markers
 * outside the sandbox roots (host-markers.ts) carry the installation id of each runtime and the
 * process group of each running exec and keeper (keeper.ts), so a server restarted after a crash
 * kills what the killed one left running before it serves (`swept`), and reconciles the rest.
 */
export class HostRuntimes {
  private readonly rings = new Map<string, ConsoleRing>();
  private readonly running = new Map<string, Set<AbortController>>();
  /** Runtimes being destroyed: their directory may still exist, but they take no new exec. */
  private readonly destroying = new Map<string, number>();
  private readonly markers: HostMarkers;
  /** Volumes of each runtime, from its marker (read once). */
  private readonly mountCache = new Map<string, Promise<readonly HostMount[]>>();
  /** The PID namespace of each sandbox (and pool workspace) and its keeper. */
  readonly keepers: Keepers;
  /** Done once the processes a previous server of this installation left are killed. */
  private readonly swept: Promise<void>;
  /** The freezer cgroup of each runtime (DESIGN.md §16), and the runtimes paused now. */
  readonly freezer: Freezer;
  private readonly paused = new Set<string>();

  constructor(
    readonly workDir: string,
    private readonly installationId: string | null = null,
  ) {
    this.markers = new HostMarkers(workDir);
    this.freezer = new Freezer();
    this.keepers = new Keepers(this.markers, this.freezer);
    this.swept = this.sweep();
  }

  /**
   * Kills every keeper and exec a previous server of this installation left (a keeper dies with
   * its server, but a launcher killed mid-start or a host that ignores the parent-death signal
   * must not leave a sandbox's processes running): mock and proot sandboxes keep their files
   * across a restart, not their processes. Only what a server that is gone started (a replica on
   * this host keeps its own); without an installation id nothing is claimed.
   */
  private async sweep(): Promise<void> {
    if (this.installationId === null) return;
    for (const id of await this.markers.runtimeIds()) {
      const m = await this.markers.readRuntime(id);
      if (m?.installation_id !== this.installationId) continue;
      // Frozen processes cannot die: a pause the killed server left is thawed first (DESIGN.md §16).
      await this.freezer.thaw(id).catch(() => undefined);
      await this.markers.killProcs(id, true);
    }
  }

  /**
   * Creates the runtime's directory (conflict when it exists), labelled with this installation and
   * its sandbox BEFORE it exists: a crash at any point never leaves an unlabelled runtime behind.
   */
  async create(runtimeId: string, sandboxId: string, mounts: readonly HostMount[] = []): Promise<string> {
    const dir = this.dir(runtimeId);
    const taken = () => conflict(`runtime ${runtimeId} already exists`);
    await mkdir(this.workDir, { recursive: true });
    if ((await stat(dir).catch(() => null)) !== null) throw taken();
    const claim = await this.markers.claimRuntime(runtimeId, {
      installation_id: this.installationId,
      sandbox_id: sandboxId,
      ...(mounts.length > 0 ? { mounts: [...mounts] } : {}),
    });
    this.mountCache.delete(runtimeId);
    if (claim === 'foreign') throw taken();
    try {
      await mkdir(dir);
    } catch (err) {
      // Someone else's directory appeared meanwhile: our label must not claim it.
      if (claim === 'created') await this.markers.removeRuntimeMarker(runtimeId);
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw taken();
      throw err;
    }
    // Its freezer cgroup, before any process of it exists (none then escapes a pause).
    await this.freezer.create(runtimeId);
    return dir;
  }

  /** Directory of a runtime; not_found for ids that cannot be runtimes. */
  dir(runtimeId: string): string {
    if (!isRuntimeId(runtimeId)) throw notFound(`runtime ${JSON.stringify(runtimeId)} not found`);
    return join(this.workDir, runtimeId);
  }

  /** The runtime's files, its volumes included. */
  fs(runtimeId: string): MountedFs {
    return new MountedFs(this.dir(runtimeId), () => this.mounts(runtimeId));
  }

  /** Volumes bound into the runtime (recorded in its marker, outside the sandbox's reach). */
  mounts(runtimeId: string): Promise<readonly HostMount[]> {
    let p = this.mountCache.get(runtimeId);
    if (!p) {
      p = this.markers.readRuntime(runtimeId).then((m) => m?.mounts ?? []);
      this.mountCache.set(runtimeId, p);
    }
    return p;
  }

  async status(runtimeId: string): Promise<RuntimeStatus> {
    await this.swept;
    if (!isRuntimeId(runtimeId)) return 'missing';
    const st = await stat(join(this.workDir, runtimeId)).catch(() => null);
    if (!st?.isDirectory()) return 'missing';
    return this.paused.has(runtimeId) ? 'paused' : 'running';
  }

  /** The runtime's directory when it exists (running or paused), else not_found. */
  async requireRunning(runtimeId: string): Promise<string> {
    const dir = this.dir(runtimeId);
    if ((await this.status(runtimeId)) === 'missing') throw notFound(`runtime ${runtimeId} not found`);
    return dir;
  }

  /**
   * Freezes every process of the runtime (DESIGN.md §16): its keeper and execs are in its cgroup
   * from birth, and whatever of its namespaces is found outside is adopted. Resolves once frozen.
   */
  async pause(runtimeId: string, signal?: AbortSignal): Promise<void> {
    await this.requireRunning(runtimeId);
    if (this.destroying.has(runtimeId)) throw notFound(`runtime ${runtimeId} not found`);
    await this.freezer.freeze(runtimeId, () => this.keepers.pids(runtimeId), signal);
    this.paused.add(runtimeId);
  }

  async resume(runtimeId: string): Promise<void> {
    await this.requireRunning(runtimeId);
    await this.freezer.thaw(runtimeId);
    this.paused.delete(runtimeId);
  }

  /**
   * When the server stops: thaws every paused runtime, so its keeper and processes can die with the
   * server as they always do (a frozen process cannot). The records stay `paused`; the next start's
   * reconciliation finds them running without their processes (DESIGN.md §10, §16).
   */
  async thawAll(): Promise<void> {
    for (const id of [...this.paused]) await this.freezer.thaw(id).catch(() => undefined);
    this.paused.clear();
  }

  /** Runtime directories, sorted by id, with the installation id of their marker (null without one). */
  async list(): Promise<RuntimeInfo[]> {
    await this.swept;
    const entries = await readdir(this.workDir, { withFileTypes: true }).catch(() => []);
    const ids = entries
      .filter((d) => d.isDirectory() && isRuntimeId(d.name))
      .map((d) => d.name)
      .sort();
    const out: RuntimeInfo[] = [];
    for (const id of ids) {
      const m = await this.markers.readRuntime(id);
      const status = this.paused.has(id) ? 'paused' : 'running';
      out.push({ runtime_id: id, sandbox_id: m?.sandbox_id ?? id, installation_id: m?.installation_id ?? null, status });
    }
    return out;
  }

  async logs(runtimeId: string, query: ConsoleQuery): Promise<ConsoleLog> {
    await this.requireRunning(runtimeId);
    return this.rings.get(runtimeId)?.read(query) ?? { lines: [], cursor: 0 };
  }

  /**
   * Kills the runtime's running commands (also those a previous server process left behind) and
   * removes its directory and markers. Idempotent.
   */
  async destroy(runtimeId: string): Promise<void> {
    if (!isRuntimeId(runtimeId)) return;
    this.destroying.set(runtimeId, (this.destroying.get(runtimeId) ?? 0) + 1);
    try {
      for (const ac of this.running.get(runtimeId) ?? []) ac.abort(new Error('runtime destroyed'));
      this.running.delete(runtimeId);
      this.rings.delete(runtimeId);
      this.mountCache.delete(runtimeId);
      // Thawed first: a frozen process cannot die. Then the namespaces: everything in them dies at
      // once (a tracer with its tracees).
      await this.freezer.thaw(runtimeId).catch(() => undefined);
      this.paused.delete(runtimeId);
      await this.keepers.stop(runtimeId);
      await this.markers.killProcs(runtimeId);
      // By directory handle, never following a link: a process that outlived the kill cannot
      // steer the removal outside the runtime by swapping a directory for a symlink.
      await new HostFs(join(this.workDir, runtimeId)).removeRoot();
      await this.markers.removeRuntime(runtimeId);
      await this.freezer.remove(runtimeId);
    } finally {
      const n = (this.destroying.get(runtimeId) ?? 1) - 1;
      if (n > 0) this.destroying.set(runtimeId, n);
      else this.destroying.delete(runtimeId);
    }
  }

  /**
   * Watches `path` of a live runtime (DESIGN §16) through the host-mode sbx-agent over its root;
   * the runtime's destroy ends the watch, like its commands.
   */
  async watch(runtimeId: string, path: string, recursive: boolean, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>> {
    const dir = await this.requireRunning(runtimeId);
    if (this.destroying.has(runtimeId)) throw notFound(`runtime ${runtimeId} not found`);
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    let set = this.running.get(runtimeId);
    if (!set) this.running.set(runtimeId, (set = new Set()));
    set.add(ac);
    const done = () => {
      signal.removeEventListener('abort', onAbort);
      set.delete(ac);
    };
    ac.signal.addEventListener('abort', done, { once: true });
    let events: AsyncIterable<WatchEvent>;
    try {
      events = await hostWatch(dir, path, recursive, ac.signal);
    } catch (err) {
      done();
      throw err;
    }
    return (async function* () {
      try {
        yield* events;
      } finally {
        ac.abort();
      }
    })();
  }

  /** An error met while starting an exec: not_found once the runtime is gone (exec racing destroy). */
  private async startError(runtimeId: string, err: unknown): Promise<unknown> {
    if (err instanceof SbxError && err.code === 'not_found') return err;
    if (this.destroying.has(runtimeId) || (await this.status(runtimeId)) === 'missing') return notFound(`runtime ${runtimeId} not found`);
    return err;
  }

  /**
   * Runs the process `build` describes for a live runtime (in namespace `ns`, keeper.ts: '' for
   * the sandbox, a workspace name in a pool); its output also goes to the console ring, and so does
   * what it left running writes later. Errors (unknown runtime, bad workdir) surface on iteration.
   */
  async *exec(
    runtimeId: string,
    build: (fs: MountedFs, dir: string) => Promise<ProcessSpec>,
    signal: AbortSignal,
    ns = '',
  ): AsyncGenerator<ExecEvent, void, undefined> {
    const dir = await this.requireRunning(runtimeId);
    if (this.destroying.has(runtimeId)) throw notFound(`runtime ${runtimeId} not found`);
    let spec: ProcessSpec;
    try {
      spec = await build(this.fs(runtimeId), dir);
    } catch (err) {
      throw await this.startError(runtimeId, err);
    }
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal.reason);
    if (signal.aborted) onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    let set = this.running.get(runtimeId);
    if (!set) this.running.set(runtimeId, (set = new Set()));
    set.add(ac);
    let ring = this.rings.get(runtimeId);
    if (!ring) this.rings.set(runtimeId, (ring = new ConsoleRing()));
    // Per-exec sources: a partial line of one command is never glued to another's output.
    const tag = randomBytes(4).toString('hex');
    let marked: Promise<void> | null = null;
    const onSpawn = (pid: number) => {
      marked = this.markers.addProc(runtimeId, tag, pid);
    };
    let started = false;
    try {
      // A destroy that ran while the command was being prepared did not see it (nor a keeper it
      // may have started): not_found.
      if (this.destroying.has(runtimeId) || (await this.status(runtimeId)) === 'missing') {
        await this.keepers.stop(runtimeId, ns);
        throw notFound(`runtime ${runtimeId} not found`);
      }
      const onLeftover = (stream: 'stdout' | 'stderr', data: Buffer) => {
        ring.append(data, `${tag}:${stream}`);
      };
      try {
        for await (const ev of execProcess({ ...spec, onSpawn, onLeftover }, ac.signal)) {
          started = true;
          if (ev.stream !== 'exit') ring.append(ev.data, `${tag}:${ev.stream}`);
          yield ev;
        }
      } catch (err) {
        throw started ? err : await this.startError(runtimeId, err);
      }
    } finally {
      if (marked !== null) {
        await marked;
        await this.markers.removeProc(runtimeId, tag);
      }
      ring.flush(`${tag}:stdout`);
      ring.flush(`${tag}:stderr`);
      signal.removeEventListener('abort', onAbort);
      set.delete(ac);
    }
  }
}
