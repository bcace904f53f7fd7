/**
 * The cgroup freezer of mock and proot sandboxes (DESIGN.md §16): one cgroup per runtime, made at
 * spawn, holding the sandbox's keeper and every exec (each joins it before it enters the sandbox's
 * namespace, keeper.ts), so pausing freezes every process of the sandbox at once — never SIGSTOP,
 * which a sandbox could undo for itself and which proot's tracer interferes with. cgroup v1 (the
 * `freezer` hierarchy at /sys/fs/cgroup/freezer: `freezer.state`) and v2 (`cgroup.freeze`, then
 * `frozen 1` in `cgroup.events`). A pause resolves only once the kernel reports the cgroup frozen
 * (bounded). Where neither is writable, `unavailable` says why and pause answers 501.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SbxError } from '../../../core/errors.js';

const V1_ROOT = '/sys/fs/cgroup/freezer';
const V2_ROOT = '/sys/fs/cgroup';
/** The directory of sbx's cgroups under the hierarchy. */
const GROUP = 'sbx';
const FREEZE_DEADLINE_MS = 10_000;
const POLL_MS = 5;
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

export type FreezerKind = 'v1' | 'v2';

export interface FreezerOptions {
  /** Test seam: the hierarchy to use instead of the host's (must behave like the kernel's). */
  root?: string;
  kind?: FreezerKind;
}

export class Freezer {
  private readonly base: string | null;
  readonly kind: FreezerKind | null;
  private readonly ready: Promise<string | null>;

  constructor(opts: FreezerOptions = {}) {
    const kind = opts.kind ?? detect();
    this.kind = kind;
    this.base = kind === null ? null : join(opts.root ?? (kind === 'v1' ? V1_ROOT : V2_ROOT), GROUP);
    this.ready = this.prepare();
  }

  /** Null when sandboxes can be frozen here; else why not (pause then answers 501 with it). */
  async unavailable(): Promise<string | null> {
    return this.ready;
  }

  private async prepare(): Promise<string | null> {
    if (this.base === null) return 'no cgroup freezer on this host (neither the cgroup v1 freezer hierarchy nor cgroup v2)';
    try {
      await mkdir(this.base, { recursive: true });
      // v2: the children's freeze needs nothing enabled; v1: a fresh group starts THAWED.
      return null;
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? 'error';
      return `the cgroup freezer is not writable here (${code}): pausing mock and proot sandboxes needs root or a delegated cgroup`;
    }
  }

  /** The runtime's cgroup directory (not checked for existence). */
  private dir(runtimeId: string): string {
    if (this.base === null || !NAME.test(runtimeId) || runtimeId.includes('..')) throw new SbxError('bad_request', 'bad runtime id');
    return join(this.base, runtimeId);
  }

  /**
   * Makes the runtime's cgroup (at spawn) and answers the file a process writes its pid to in order
   * to join it; null when there is no usable freezer (the sandbox then simply cannot pause). A
   * cgroup left by a killed server is reused, thawed.
   */
  async create(runtimeId: string): Promise<string | null> {
    if ((await this.ready) !== null) return null;
    const dir = this.dir(runtimeId);
    try {
      await mkdir(dir, { recursive: true });
      await this.write(dir, false);
      return join(dir, 'cgroup.procs');
    } catch {
      return null;
    }
  }

  /** The join file of an existing cgroup of the runtime, or null. */
  procsFile(runtimeId: string): string | null {
    if (this.base === null) return null;
    const f = join(this.dir(runtimeId), 'cgroup.procs');
    return existsSync(f) ? f : null;
  }

  /** argv that joins the runtime's cgroup, then runs `argv` (keeper launches and exec entries). */
  wrap(runtimeId: string, argv: readonly string[]): string[] {
    const procs = this.procsFile(runtimeId);
    if (procs === null) return [...argv];
    return ['/bin/sh', '-c', 'echo $$ >"$0" && exec "$@"', procs, ...argv];
  }

  /** Moves host processes into the runtime's cgroup (a stray the sweep found); gone ones are skipped. */
  async adopt(runtimeId: string, pids: readonly number[]): Promise<void> {
    const procs = this.procsFile(runtimeId);
    if (procs === null) return;
    for (const pid of pids) await appendFile(procs, `${pid}\n`).catch(() => undefined);
  }

  /**
   * Freezes the runtime's cgroup and waits until the kernel says every task in it is frozen. `sweep`
   * answers the processes of the sandbox's namespaces by pid: after the freeze, any of them outside
   * the cgroup is adopted and frozen too.
   */
  async freeze(runtimeId: string, sweep: () => Promise<number[]>, signal?: AbortSignal): Promise<void> {
    const why = await this.ready;
    if (why !== null) throw new SbxError('not_implemented', `cannot pause: ${why}`);
    const dir = this.dir(runtimeId);
    if (!existsSync(dir)) await this.create(runtimeId);
    if (!existsSync(dir)) throw new SbxError('not_implemented', 'cannot pause: this sandbox has no freezer cgroup');
    await this.write(dir, true);
    await this.waitFrozen(dir, signal);
    // Every process is born in the cgroup (keeper.ts); one of the namespace found outside it anyway
    // (moved out from inside) is adopted into the frozen cgroup, which freezes it.
    const late = await sweep();
    if (late.length > 0) {
      await this.adopt(runtimeId, late);
      await this.write(dir, true);
      await this.waitFrozen(dir, signal);
    }
  }

  /** Thaws the runtime's cgroup. Idempotent; a runtime without one has nothing frozen. */
  async thaw(runtimeId: string): Promise<void> {
    const dir = this.dir(runtimeId);
    if (!existsSync(dir)) return;
    await this.write(dir, false);
  }

  /** Whether the runtime's cgroup is frozen now. */
  async frozen(runtimeId: string): Promise<boolean> {
    if (this.base === null) return false;
    const dir = this.dir(runtimeId);
    if (this.kind === 'v1') return (await readFile(join(dir, 'freezer.state'), 'utf8').catch(() => '')).trim() === 'FROZEN';
    return /^frozen 1$/m.test(await readFile(join(dir, 'cgroup.events'), 'utf8').catch(() => ''));
  }

  /** Removes the runtime's cgroup (thawed first so killed tasks can die); waits briefly for it to empty. */
  async remove(runtimeId: string): Promise<void> {
    if (this.base === null) return;
    const dir = this.dir(runtimeId);
    if (!existsSync(dir)) return;
    await this.write(dir, false).catch(() => undefined);
    for (let i = 0; i < 100; i++) {
      try {
        await rmdir(dir);
        return;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        if (code !== 'EBUSY') return;
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  }

  private async write(dir: string, frozen: boolean): Promise<void> {
    if (this.kind === 'v1') await writeFile(join(dir, 'freezer.state'), frozen ? 'FROZEN' : 'THAWED');
    else await writeFile(join(dir, 'cgroup.freeze'), frozen ? '1' : '0');
  }

  private async waitFrozen(dir: string, signal?: AbortSignal): Promise<void> {
    const deadline = performance.now() + FREEZE_DEADLINE_MS;
    for (;;) {
      const done =
        this.kind === 'v1'
          ? (await readFile(join(dir, 'freezer.state'), 'utf8')).trim() === 'FROZEN'
          : /^frozen 1$/m.test(await readFile(join(dir, 'cgroup.events'), 'utf8'));
      if (done) return;
      if (signal?.aborted || performance.now() > deadline) {
        await this.write(dir, false).catch(() => undefined);
        throw new SbxError('provider_error', 'the sandbox did not freeze in time; it was left running');
      }
      // v1 may stay FREEZING while a task is in an uninterruptible wait: asking again retries it.
      if (this.kind === 'v1') await this.write(dir, true).catch(() => undefined);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  }
}

/** Which freezer this host has: v2 when /sys/fs/cgroup is the unified hierarchy, else v1's freezer hierarchy, else none. */
function detect(): FreezerKind | null {
  if (existsSync(join(V2_ROOT, 'cgroup.controllers'))) return 'v2';
  if (existsSync(join(V1_ROOT, 'freezer.state')) || existsSync(join(V1_ROOT, 'cgroup.procs'))) return 'v1';
  return null;
}
