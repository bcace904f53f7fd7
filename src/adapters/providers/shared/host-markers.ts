import { link, mkdir, readdir, readFile, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/**
 * Markers of host-backed runtimes, kept OUTSIDE every sandbox root and outside the directory that
 * holds them (in `.<workDir name>.sbx` beside it), so that a server started after a crash can tell
 * which runtimes and which exec process trees belong to its installation:
 *   runtimes/<runtime_id>.json       {installation_id, sandbox_id}
 *   procs/<runtime_id>/<tag>.json    {pid, start}  (an exec's or a keeper's process-group leader)
 *   ctl/<runtime_id>/<ns>/           a proot keeper's request FIFO and each exec's pipes (keeper.ts)
 * A marker is only a hint: a process is killed only when its pid still has the recorded start time
 * and leads its own process group, so an edited marker can never make sbx kill something else.
 */
export interface RuntimeMarker {
  installation_id: string | null;
  sandbox_id: string | null;
  /** Volumes bound into the runtime (host directory → guest path), absent for none. */
  mounts?: Array<{ host: string; guest: string }>;
}

interface ProcMarker {
  pid: number;
  start: string;
  /** The server process that started it (pid and start time): a start sweeps only what a dead one left. */
  owner?: { pid: number; start: string };
}

let ownStart: Promise<string | null> | null = null;
/** This process's start time (ticks after boot). */
function ownProcessStart(): Promise<string | null> {
  ownStart ??= processStart(process.pid);
  return ownStart;
}

const KILL_WAIT_MS = 3_000;

export class HostMarkers {
  private readonly base: string;

  constructor(workDir: string) {
    this.base = markerDir(workDir);
  }

  private runtimeFile(id: string): string {
    return join(this.base, 'runtimes', `${id}.json`);
  }

  private procsDir(id: string): string {
    return join(this.base, 'procs', id);
  }

  /**
   * Creates the runtime's marker with its whole content at once, unless one exists: `created`, or
   * `ours` when an earlier marker names the same installation (left by a crash before its
   * directory was made), or `foreign` when it names another.
   */
  async claimRuntime(id: string, marker: RuntimeMarker): Promise<'created' | 'ours' | 'foreign'> {
    const file = this.runtimeFile(id);
    await mkdir(join(file, '..'), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
    await writeFile(tmp, JSON.stringify(marker), { mode: 0o600 });
    try {
      await link(tmp, file);
      return 'created';
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const existing = await this.readRuntime(id);
      return existing && existing.installation_id === marker.installation_id ? 'ours' : 'foreign';
    } finally {
      await unlink(tmp).catch(() => undefined);
    }
  }

  /** Ids of the runtimes that have a marker. */
  async runtimeIds(): Promise<string[]> {
    const names = await readdir(join(this.base, 'runtimes')).catch(() => [] as string[]);
    return names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length));
  }

  async removeRuntimeMarker(id: string): Promise<void> {
    await rm(this.runtimeFile(id), { force: true }).catch(() => undefined);
  }

  async readRuntime(id: string): Promise<RuntimeMarker | null> {
    try {
      const v = JSON.parse(await readFile(this.runtimeFile(id), 'utf8')) as Partial<RuntimeMarker>;
      return {
        installation_id: typeof v.installation_id === 'string' ? v.installation_id : null,
        sandbox_id: typeof v.sandbox_id === 'string' ? v.sandbox_id : null,
        ...(Array.isArray(v.mounts) ? { mounts: v.mounts.filter((m) => typeof m?.host === 'string' && typeof m?.guest === 'string') } : {}),
      };
    } catch {
      return null;
    }
  }

  /** Records a running exec's group leader; resolves once written. Never rejects. */
  async addProc(id: string, tag: string, pid: number): Promise<void> {
    const start = await processStart(pid);
    if (start === null) return;
    const self = await ownProcessStart();
    const owner = self === null ? {} : { owner: { pid: process.pid, start: self } };
    await writeAtomic(join(this.procsDir(id), `${tag}.json`), JSON.stringify({ pid, start, ...owner } satisfies ProcMarker)).catch(
      () => undefined,
    );
  }

  async removeProc(id: string, tag: string): Promise<void> {
    await rm(join(this.procsDir(id), `${tag}.json`), { force: true }).catch(() => undefined);
  }

  /**
   * Kills every exec process tree recorded for the runtime whose leader is still the recorded
   * process (same pid, same start time, leader of its group), and waits (bounded) until they are gone.
   * With `leftOnly`, only those whose server is gone (another live server — a replica on this host —
   * keeps its own).
   */
  async killProcs(id: string, leftOnly = false): Promise<void> {
    const dir = this.procsDir(id);
    const names = await readdir(dir).catch(() => [] as string[]);
    const killed: ProcMarker[] = [];
    for (const name of names) {
      let m: ProcMarker;
      try {
        m = JSON.parse(await readFile(join(dir, name), 'utf8')) as ProcMarker;
      } catch {
        continue;
      }
      if (!Number.isSafeInteger(m.pid) || m.pid <= 1 || m.pid === process.pid || typeof m.start !== 'string') continue;
      if (leftOnly && m.owner && Number.isSafeInteger(m.owner.pid) && (await procStat(m.owner.pid))?.start === m.owner.start) continue;
      const st = await procStat(m.pid);
      if (!st || st.start !== m.start || st.pgrp !== m.pid) continue;
      try {
        // The group holds the namespace launcher and every exec process that did not leave it;
        // the namespace init dies with the launcher and takes the rest of the namespace along.
        process.kill(-m.pid, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
      killed.push(m);
    }
    const deadline = Date.now() + KILL_WAIT_MS;
    for (const m of killed) {
      while (Date.now() < deadline) {
        const st = await procStat(m.pid);
        if (!st || st.start !== m.start || st.state === 'Z') break;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  /** Forgets a runtime: its marker and its exec markers. */
  /**
   * Where the keeper of namespace `ns` of the runtime exchanges each exec's request and pipes with
   * the guest (keeper.ts, proot): outside every sandbox root, bound into that keeper's guest only.
   */
  ctlDir(id: string, ns: string): string {
    return join(this.base, 'ctl', id, ns === '' ? '_' : ns);
  }

  async removeRuntime(id: string): Promise<void> {
    await rm(join(this.base, 'ctl', id), { recursive: true, force: true }).catch(() => undefined);
    await rm(this.procsDir(id), { recursive: true, force: true }).catch(() => undefined);
    await rm(this.runtimeFile(id), { force: true }).catch(() => undefined);
  }
}

/** Where the markers of the runtimes under `workDir` live. */
export function markerDir(workDir: string): string {
  return join(dirname(workDir), `.${basename(workDir)}.sbx`);
}

async function writeAtomic(file: string, content: string): Promise<void> {
  const dir = join(file, '..');
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  await writeFile(tmp, content, { mode: 0o600 });
  await rename(tmp, file);
}

interface ProcStat {
  state: string;
  pgrp: number;
  start: string;
}

/** State, process group and start time (clock ticks after boot) of a host process, or null. */
async function procStat(pid: number): Promise<ProcStat | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const close = stat.lastIndexOf(')');
  if (close < 0) return null;
  // After `pid (comm) `: state(0) ppid(1) pgrp(2) … starttime(19).
  const f = stat.slice(close + 2).split(' ');
  if (f.length < 20) return null;
  return { state: f[0]!, pgrp: Number(f[2]), start: f[19]! };
}

async function processStart(pid: number): Promise<string | null> {
  return (await procStat(pid))?.start ?? null;
}
