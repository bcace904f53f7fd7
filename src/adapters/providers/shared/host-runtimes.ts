import { randomBytes } from 'node:crypto';
import { readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { notFound } from '../../../core/errors.js';
import type { ConsoleLog, ConsoleQuery, ExecEvent, RuntimeInfo, RuntimeStatus } from '../../../core/ports.js';
import { ConsoleRing } from './console-ring.js';
import { execProcess, type ProcessSpec } from './exec-process.js';
import { HostFs } from './host-fs.js';

/** Runtime ids name directories, so they must be plain names: no `/`, no `..`. */
const RUNTIME_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** True when `id` can safely name a runtime directory. */
export function isRuntimeId(id: string): boolean {
  return RUNTIME_ID_RE.test(id) && !id.includes('..');
}

/**
 * Bookkeeping shared by providers whose runtimes are host directories (`<workDir>/<runtime_id>`):
 * file access, console rings, running commands (killed on destroy) and the inventory.
 */
export class HostRuntimes {
  private readonly rings = new Map<string, ConsoleRing>();
  private readonly running = new Map<string, Set<AbortController>>();

  constructor(readonly workDir: string) {}

  /** Directory of a runtime; not_found for ids that cannot be runtimes. */
  dir(runtimeId: string): string {
    if (!isRuntimeId(runtimeId)) throw notFound(`runtime ${JSON.stringify(runtimeId)} not found`);
    return join(this.workDir, runtimeId);
  }

  fs(runtimeId: string): HostFs {
    return new HostFs(this.dir(runtimeId));
  }

  async status(runtimeId: string): Promise<RuntimeStatus> {
    if (!isRuntimeId(runtimeId)) return 'missing';
    const st = await stat(join(this.workDir, runtimeId)).catch(() => null);
    return st?.isDirectory() ? 'running' : 'missing';
  }

  async requireRunning(runtimeId: string): Promise<string> {
    const dir = this.dir(runtimeId);
    if ((await this.status(runtimeId)) !== 'running') throw notFound(`runtime ${runtimeId} not found`);
    return dir;
  }

  /** Runtime directories, sorted by id. */
  async list(): Promise<RuntimeInfo[]> {
    const entries = await readdir(this.workDir, { withFileTypes: true }).catch(() => []);
    return entries
      .filter((d) => d.isDirectory() && isRuntimeId(d.name))
      .map((d) => d.name)
      .sort()
      .map((id) => ({ runtime_id: id, sandbox_id: id, installation_id: null, status: 'running' as const }));
  }

  async logs(runtimeId: string, query: ConsoleQuery): Promise<ConsoleLog> {
    await this.requireRunning(runtimeId);
    return this.rings.get(runtimeId)?.read(query) ?? { lines: [], cursor: 0 };
  }

  /** Kills the runtime's running commands and removes its directory. Idempotent. */
  async destroy(runtimeId: string): Promise<void> {
    if (!isRuntimeId(runtimeId)) return;
    for (const ac of this.running.get(runtimeId) ?? []) ac.abort(new Error('runtime destroyed'));
    this.running.delete(runtimeId);
    this.rings.delete(runtimeId);
    await rm(join(this.workDir, runtimeId), { recursive: true, force: true, maxRetries: 3 });
  }

  /**
   * Runs the process `build` describes for a live runtime; its output also goes to the console
   * ring. Errors (unknown runtime, bad workdir) surface on iteration.
   */
  async *exec(runtimeId: string, build: (fs: HostFs, dir: string) => Promise<ProcessSpec>, signal: AbortSignal): AsyncGenerator<ExecEvent, void, undefined> {
    const dir = await this.requireRunning(runtimeId);
    const spec = await build(new HostFs(dir), dir);
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
    try {
      for await (const ev of execProcess(spec, ac.signal)) {
        if (ev.type !== 'exit') ring.append(ev.data, `${tag}:${ev.type}`);
        yield ev;
      }
    } finally {
      ring.flush(`${tag}:stdout`);
      ring.flush(`${tag}:stderr`);
      signal.removeEventListener('abort', onAbort);
      set.delete(ac);
    }
  }
}
