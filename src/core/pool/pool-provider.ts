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
  SpawnResult,
  SpawnSpec,
  WatchEvent,
  WorkspaceOps,
} from '../ports/index.js';
import { parsePoolId, PoolSlots, poolId, type PoolStatusView, type SlotOptions } from './slots.js';
import { tenantEvents, workspacePath } from './workspace.js';

export interface PoolOptions extends SlotOptions {
  /** `queue` waits up to `queueTimeoutMs` for a slot when the pool is full; `reject` answers 503. */
  overflow: 'reject' | 'queue';
  queueTimeoutMs: number;
}

/** First uid of pool tenants: slot n runs as 10000 + n. */
export const POOL_UID_BASE = 10_000;

export class PoolProvider implements Provider {
  readonly name: string;
  readonly capabilities: readonly string[];
  /** Which runtime holds which tenant: the slot bookkeeping. */
  private readonly slots: PoolSlots;
  constructor(
    private readonly base: Provider,
    private readonly opts: PoolOptions,
  ) {
    this.name = base.name;
    this.slots = new PoolSlots(base, opts);
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

  async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
    if (spec.network)
      throw new SbxError('not_implemented', "pool sandboxes share their runtime's network: a network per spawn needs pool mode off");
    const { max_users_per_vm: perVm } = this.opts.settings;
    const deadline = performance.now() + (this.opts.overflow === 'queue' ? this.opts.queueTimeoutMs : 0);
    for (;;) {
      const claimed = await this.slots.claim(spec.sandbox_id, signal);
      if (claimed) {
        const id = poolId(claimed.slot, spec.sandbox_id, claimed.shared.runtime);
        try {
          await this.ws(id).prepare(signal);
        } catch (err) {
          await this.slots.release(id).catch(() => undefined);
          throw err;
        }
        return { runtime_id: id };
      }
      const left = deadline - performance.now();
      if (left <= 0) {
        const { max_vms } = this.opts.settings;
        throw unavailable(`the pool is full: ${max_vms} shared runtime(s) with ${perVm} workspace(s) each are in use`);
      }
      await this.slots.slotFreed(left, signal);
    }
  }

  async destroy(runtimeId: string, signal?: AbortSignal): Promise<void> {
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.destroy(runtimeId, signal);
    if (!(await this.slots.holds(p))) return; // already gone: idempotent
    if ((await this.base.status(p.runtime, signal)) === 'running') await this.ws(runtimeId).remove(signal);
    await this.slots.locked(() => this.slots.release(runtimeId, undefined, signal));
  }

  async status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus> {
    const p = parsePoolId(runtimeId);
    if (!p) return this.base.status(runtimeId, signal);
    if (!(await this.slots.holds(p))) return 'missing';
    return this.base.status(p.runtime, signal);
  }

  /** The base runtimes, a shared one expanded into its workspaces (reaper, reconciliation). */
  async listRuntimes(signal?: AbortSignal): Promise<RuntimeInfo[]> {
    if (!this.base.listRuntimes) return [];
    await this.slots.load();
    return this.slots.expand(await this.base.listRuntimes(signal));
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
    if (!(await this.slots.holds(p))) throw notFound(`sandbox ${p.sandbox_id} has no workspace`);
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

  /** Live shared runtimes and workspaces (GET /api/v1/pool/status). */
  view(): Promise<PoolStatusView> {
    return this.slots.view();
  }

  close(): Promise<void> {
    return this.base.close?.() ?? Promise.resolve();
  }
}
