/**
 * Pool mode (spec 1, 2.11, 8; DESIGN.md §8): logical sandboxes in shared runtimes. The pool is a
 * Provider wrapped around the pool's provider, so lifecycle, exec, files, the reaper and
 * reconciliation work on logical sandboxes unchanged: a logical sandbox's runtime id names its
 * slot (`pool:<slot>:<sandbox_id>:<runtime>`), stored on its row, so a restart keeps every
 * assignment. spawn takes the oldest runtime with a free slot, else starts one while fewer than
 * `max_vms` run, else refuses (503) or waits for a slot (queue mode); destroy removes the
 * workspace and, with the last one, the runtime.
 *
 * A slot's number is its uid offset (uid 10000 + slot), taken from a counter the store keeps per
 * runtime: no uid is given to a second tenant in a runtime's life, so nothing one tenant leaves
 * behind (a process, a file in /tmp or /dev/shm, an IPC object) ever belongs to the next. A runtime
 * whose counter is used up takes no one new and goes with its last tenant.
 */
import { notFound, SbxError, unavailable } from '../errors.js';
import { bytesOnce, collectBytes } from '../sandboxes/file-bytes.js';
import type {
  ConsoleLog,
  ExecEvent,
  PreviewUpstream,
  Provider,
  RuntimeInfo,
  RuntimeStatus,
  SandboxStore,
  SpawnResult,
  SpawnSpec,
  PoolUidStore,
  WatchEvent,
  WorkspaceOps,
} from '../ports/index.js';
import type { PoolSettings } from '../settings.js';
import { tenantEvents, workspacePath } from './workspace.js';

export interface PoolOptions {
  settings: PoolSettings;
  store: Pick<SandboxStore, 'listSandboxes'> & PoolUidStore;
  /** `queue` waits up to `queueTimeoutMs` for a slot when the pool is full; `reject` answers 503. */
  overflow: 'reject' | 'queue';
  queueTimeoutMs: number;
  /** A fresh id for a shared runtime (labels it). */
  runtimeName(): string;
}

/** First uid of pool tenants: slot n runs as 10000 + n. */
export const POOL_UID_BASE = 10_000;
/** Uid offsets a runtime may give (10000 … 59999): one whose counter reaches this takes no new tenant. */
export const POOL_UID_SPAN = 50_000;
const PREFIX = 'pool:';
const LIVE = ['running', 'paused', 'unhealthy', 'error'] as const;

interface Shared {
  /** The base provider's runtime id. */
  runtime: string;
  /** slot (uid offset) → sandbox id. */
  slots: Map<number, string>;
  /** Its uid counter is used up: no new tenant; destroyed with its last one. */
  retired?: boolean;
}

/** A logical sandbox's runtime id, parsed; null for a runtime of its own (not a pool one). */
export function parsePoolId(runtimeId: string): { slot: number; sandbox_id: string; runtime: string } | null {
  if (!runtimeId.startsWith(PREFIX)) return null;
  const [slot, sandbox, ...rest] = runtimeId.slice(PREFIX.length).split(':');
  const runtime = rest.join(':');
  if (!/^\d+$/.test(slot ?? '') || !sandbox || !runtime) return null;
  return { slot: Number(slot), sandbox_id: sandbox, runtime };
}

const poolId = (slot: number, sandboxId: string, runtime: string) => `${PREFIX}${slot}:${sandboxId}:${runtime}`;

export interface PoolStatusView {
  vms: number;
  total_users: number;
  runtimes: Array<{ runtime_id: string; users: number }>;
}

export class PoolProvider implements Provider {
  readonly name: string;
  readonly capabilities: readonly string[];
  /** Shared runtimes, oldest first. */
  private readonly shared: Shared[] = [];
  private loaded: Promise<void> | null = null;
  /** Serializes slot choice and runtime creation. */
  private lock: Promise<unknown> = Promise.resolve();
  private creating = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly base: Provider,
    private readonly opts: PoolOptions,
  ) {
    this.name = base.name;
    // A tenant's background processes stay attached: the in-sandbox process directory is per runtime, not per tenant.
    this.capabilities = base.capabilities.filter((c) => c !== 'detach');
    if (!base.workspace) throw new Error(`provider ${base.name} cannot back a pool (no workspaces)`);
  }

  config(): Record<string, unknown> {
    return this.base.config();
  }
  health(signal?: AbortSignal) {
    return this.base.health(signal);
  }

  /** Live shared runtimes and workspaces (GET /api/v1/pool/status). */
  async view(): Promise<PoolStatusView> {
    await this.load();
    return {
      vms: this.shared.length,
      total_users: this.shared.reduce((n, s) => n + s.slots.size, 0),
      runtimes: this.shared.map((s) => ({ runtime_id: s.runtime, users: s.slots.size })),
    };
  }

  /** Slot assignments from the store: every live logical sandbox names its slot and runtime. */
  private load(): Promise<void> {
    this.loaded ??= (async () => {
      const rows = await this.opts.store.listSandboxes({ states: [...LIVE] });
      for (const r of rows) {
        const p = r.runtime_id ? parsePoolId(r.runtime_id) : null;
        if (!p) continue;
        let s = this.shared.find((x) => x.runtime === p.runtime);
        if (!s) this.shared.push((s = { runtime: p.runtime, slots: new Map() }));
        s.slots.set(p.slot, p.sandbox_id);
      }
    })().catch((err: unknown) => {
      this.loaded = null;
      throw err;
    });
    return this.loaded;
  }

  private locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
    if (spec.network)
      throw new SbxError('not_implemented', "pool sandboxes share their runtime's network: a network per spawn needs pool mode off");
    await this.load();
    const { max_users_per_vm: perVm } = this.opts.settings;
    const deadline = performance.now() + (this.opts.overflow === 'queue' ? this.opts.queueTimeoutMs : 0);
    for (;;) {
      const claimed = await this.locked(async () => {
        for (const s of [...this.shared]) {
          if (s.retired || s.slots.size >= perVm) continue;
          const slot = await this.nextSlot(s);
          if (slot === null) continue;
          s.slots.set(slot, spec.sandbox_id);
          return { shared: s, slot };
        }
        // Retired runtimes still count: they run until their last tenant leaves.
        if (this.shared.length + this.creating >= this.opts.settings.max_vms) return null;
        this.creating++;
        try {
          const s = await this.newRuntime(signal);
          const slot = await this.nextSlot(s);
          if (slot === null) throw new SbxError('provider_error', 'a new pool runtime got no uid for its first workspace');
          s.slots.set(slot, spec.sandbox_id);
          return { shared: s, slot };
        } finally {
          this.creating--;
        }
      });
      if (claimed) {
        const id = poolId(claimed.slot, spec.sandbox_id, claimed.shared.runtime);
        try {
          await this.ws(id).prepare(signal);
        } catch (err) {
          await this.release(id).catch(() => undefined);
          throw err;
        }
        return { runtime_id: id };
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        const { max_vms } = this.opts.settings;
        throw unavailable(`the pool is full: ${max_vms} shared runtime(s) with ${perVm} workspace(s) each are in use`);
      }
      await this.slotFreed(left, signal);
    }
  }

  /** A new shared runtime (its uid counter starts at its first workspace). */
  private async newRuntime(signal?: AbortSignal): Promise<Shared> {
    const { runtime_id } = await this.base.spawn(
      {
        sandbox_id: this.opts.runtimeName(),
        image: this.opts.settings.image,
        memory_mb: this.opts.settings.memory_mb,
        vcpus: this.opts.settings.vcpus,
        metadata: { 'sbx.pool': 'shared' },
        owner_id: null,
      },
      signal,
    );
    const s: Shared = { runtime: runtime_id, slots: new Map() };
    this.shared.push(s);
    return s;
  }

  /**
   * The runtime's next uid offset from the store's counter, or null once the counter is used up
   * (the runtime retires). Offsets at or below one in use (slots stored before the counter existed)
   * are skipped, so two tenants never share one. A runtime left with no tenant by a failure goes.
   */
  private async nextSlot(s: Shared): Promise<number | null> {
    const floor = Math.max(-1, ...s.slots.keys());
    for (;;) {
      let slot: number;
      try {
        slot = await this.opts.store.takePoolUid(s.runtime);
      } catch (err) {
        if (s.slots.size === 0) await this.release(null, s).catch(() => undefined);
        throw err;
      }
      if (slot >= POOL_UID_SPAN) {
        s.retired = true;
        if (s.slots.size === 0) await this.release(null, s).catch(() => undefined);
        return null;
      }
      if (slot > floor) return slot;
    }
  }

  /** Resolves when a slot may have been freed, after `ms`, or on abort. */
  private slotFreed(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /**
   * Frees a slot (`id` null: none, `shared` names the runtime); a runtime left without workspaces
   * is destroyed and its uid counter forgotten.
   */
  private async release(id: string | null, shared?: Shared, signal?: AbortSignal): Promise<void> {
    const p = id ? parsePoolId(id)! : null;
    const s = shared ?? this.shared.find((x) => x.runtime === p?.runtime);
    if (s && p && s.slots.get(p.slot) === p.sandbox_id) s.slots.delete(p.slot);
    if (s && s.slots.size === 0) {
      this.shared.splice(this.shared.indexOf(s), 1);
      try {
        await this.base.destroy(s.runtime, signal);
      } catch (err) {
        // Still there: kept in the pool view so the next pass (reaper, reconciliation) sees it.
        if (!this.shared.includes(s)) this.shared.push(s);
        throw err;
      }
      await this.opts.store.forgetPoolRuntime(s.runtime).catch(() => undefined);
    }
    for (const wake of [...this.waiters]) wake();
  }

  async destroy(runtimeId: string, signal?: AbortSignal): Promise<void> {
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.destroy(runtimeId, signal);
    await this.load();
    const s = this.shared.find((x) => x.runtime === p.runtime);
    if (!s || s.slots.get(p.slot) !== p.sandbox_id) return; // already gone: idempotent
    if ((await this.base.status(p.runtime, signal)) === 'running') await this.ws(runtimeId).remove(signal);
    await this.locked(() => this.release(runtimeId, undefined, signal));
  }

  async status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus> {
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.status(runtimeId, signal);
    await this.load();
    const s = this.shared.find((x) => x.runtime === p.runtime);
    if (!s || s.slots.get(p.slot) !== p.sandbox_id) return 'missing';
    return this.base.status(p.runtime, signal);
  }

  /** The base runtimes, a shared one expanded into its workspaces (reaper, reconciliation). */
  async listRuntimes(signal?: AbortSignal): Promise<RuntimeInfo[]> {
    if (!this.base.listRuntimes) return [];
    await this.load();
    const out: RuntimeInfo[] = [];
    for (const rt of await this.base.listRuntimes(signal)) {
      const s = this.shared.find((x) => x.runtime === rt.runtime_id);
      if (!s) {
        out.push(rt);
        continue;
      }
      for (const [slot, sandbox] of s.slots) out.push({ ...rt, runtime_id: poolId(slot, sandbox, s.runtime), sandbox_id: sandbox });
    }
    return out;
  }

  /** The workspace of a logical sandbox (its runtime id names it). */
  private ws(runtimeId: string): WorkspaceOps {
    const p = parsePoolId(runtimeId);
    if (!p) throw notFound(`runtime ${runtimeId} is not a pool workspace`);
    return this.base.workspace!(p.runtime, { name: p.sandbox_id, uid: POOL_UID_BASE + p.slot, gid: POOL_UID_BASE + p.slot });
  }

  /** A live workspace or not_found (a destroyed one must not answer through its runtime). */
  private async live(runtimeId: string): Promise<WorkspaceOps> {
    const p = parsePoolId(runtimeId);
    if (!p) throw notFound(`runtime ${runtimeId} is not a pool workspace`);
    await this.load();
    const s = this.shared.find((x) => x.runtime === p.runtime);
    if (!s || s.slots.get(p.slot) !== p.sandbox_id) throw notFound(`sandbox ${p.sandbox_id} has no workspace`);
    return this.ws(runtimeId);
  }

  exec(runtimeId: string, spec: Parameters<Provider['exec']>[1], signal: AbortSignal): AsyncIterable<ExecEvent> {
    if (!parsePoolId(runtimeId)) return this.base.exec(runtimeId, spec, signal);
    const live = () => this.live(runtimeId);
    return {
      async *[Symbol.asyncIterator]() {
        yield* (await live()).exec(spec, signal);
      },
    };
  }

  writeFile = async (id: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).writeFile(path, content, mode, signal) : this.base.writeFile(id, path, content, mode, signal);
  /** Streamed where the workspace or the base provider streams, else collected (bounded by the caller) and written whole. */
  writeFileStream = async (
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    mode: () => number | undefined,
    signal?: AbortSignal,
  ): Promise<void> => {
    if (!parsePoolId(id)) {
      if (this.base.writeFileStream) return this.base.writeFileStream(id, path, body, mode, signal);
      const bytes = await collectBytes(body);
      return this.base.writeFile(id, path, bytes, mode(), signal);
    }
    const ws = await this.live(id);
    if (ws.writeFileStream) return ws.writeFileStream(path, body, mode, signal);
    const bytes = await collectBytes(body);
    return ws.writeFile(path, bytes, mode(), signal);
  };
  readFile = async (id: string, path: string, signal?: AbortSignal, maxBytes?: number) =>
    parsePoolId(id) ? (await this.live(id)).readFile(path, signal, maxBytes) : this.base.readFile(id, path, signal, maxBytes);
  openFile = async (id: string, path: string, signal?: AbortSignal, maxBytes?: number) => {
    if (!parsePoolId(id)) {
      if (this.base.openFile) return this.base.openFile(id, path, signal, maxBytes);
      const data = await this.base.readFile(id, path, signal, maxBytes);
      return { size: data.byteLength, body: bytesOnce(data) };
    }
    const ws = await this.live(id);
    if (ws.openFile) return ws.openFile(path, signal, maxBytes);
    const data = await ws.readFile(path, signal, maxBytes);
    return { size: data.byteLength, body: bytesOnce(data) };
  };
  deleteFile = async (id: string, path: string, recursive: boolean, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).deleteFile(path, recursive, signal) : this.base.deleteFile(id, path, recursive, signal);
  listFiles = async (id: string, path: string, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).listFiles(path, signal) : this.base.listFiles(id, path, signal);
  moveFile = async (id: string, from: string, to: string, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).moveFile(from, to, signal) : this.base.moveFile(id, from, to, signal);
  chmod = async (id: string, path: string, mode: number, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).chmod(path, mode, signal) : this.base.chmod(id, path, mode, signal);
  stat = async (id: string, path: string, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).stat(path, signal) : this.base.stat(id, path, signal);
  glob = async (id: string, pattern: string, signal?: AbortSignal) =>
    parsePoolId(id) ? (await this.live(id)).glob(pattern, signal) : this.base.glob(id, pattern, signal);

  /**
   * A tenant watches its own workspace only (DESIGN §8, §16): the base provider's watch of
   * `/workspace/<name>` + path, its events with the tenant's paths (never one outside the workspace).
   */
  async watch(runtimeId: string, path: string, opts: { recursive: boolean }, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>> {
    if (!this.base.watch) throw new SbxError('not_implemented', `provider ${this.name} cannot watch files`);
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.watch(runtimeId, path, opts, signal);
    await this.live(runtimeId);
    const root = workspacePath({ name: p.sandbox_id, uid: 0, gid: 0 });
    return tenantEvents(await this.base.watch(p.runtime, path === '/' ? root : `${root}${path}`, opts, signal), root);
  }

  /** Console output is the shared runtime's, every tenant's commands mixed: never shown to one tenant. */
  async logs(runtimeId: string, query: Parameters<Provider['logs']>[1], signal?: AbortSignal): Promise<ConsoleLog> {
    if (!parsePoolId(runtimeId)) return this.base.logs(runtimeId, query, signal);
    throw new SbxError(
      'not_implemented',
      'console logs are not available for pool sandboxes: the runtime and its console are shared by every tenant',
    );
  }

  /**
   * Tenants of one runtime share its network, so a port is the runtime's: a tenant's preview is
   * served only while the listener on that port is its own (`listenerOwned`, judged on every
   * request), else 502 exactly as when nothing listens — another tenant's server is never reached.
   */
  async previewUpstream(runtimeId: string, port: number, signal?: AbortSignal): Promise<PreviewUpstream> {
    if (!this.base.previewUpstream) throw new SbxError('not_implemented', `provider ${this.name} cannot serve previews`);
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.previewUpstream(runtimeId, port, signal);
    const ws = await this.live(runtimeId);
    const upstream = await this.base.previewUpstream(p.runtime, port, signal);
    if (!ws.listenerOwned || !(await ws.listenerOwned(port, upstream.host, signal)))
      throw new SbxError('bad_gateway', `nothing is listening on port ${port} of sandbox ${p.sandbox_id}`);
    return { ...upstream, shared: true };
  }

  close(): Promise<void> {
    return this.base.close?.() ?? Promise.resolve();
  }
}
