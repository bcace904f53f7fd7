/**
 * The pool's slot bookkeeping (DESIGN.md §8): which shared runtime holds which tenant. A slot is a
 * uid offset from the store's per-runtime counter, named in the logical sandbox's runtime id
 * (`pool:<slot>:<sandbox_id>:<runtime>`), so the assignments are read back from the store after a
 * restart. A runtime whose counter is used up retires; one left with no tenant is destroyed.
 */
import { SbxError } from '../errors.js';
import type { PoolUidStore, Provider, RuntimeInfo, SandboxStore } from '../ports/index.js';
import type { PoolSettings } from '../settings.js';

/** Uid offsets a runtime may give (10000 … 59999): one whose counter reaches this takes no new tenant. */
export const POOL_UID_SPAN = 50_000;
const PREFIX = 'pool:';
const LIVE = ['running', 'paused', 'unhealthy', 'error'] as const;

/** What the slot bookkeeping needs of the pool's options. */
export interface SlotOptions {
  settings: PoolSettings;
  store: Pick<SandboxStore, 'listSandboxes'> & PoolUidStore;
  /** A fresh id for a shared runtime (labels it). */
  runtimeName(): string;
}

export interface Shared {
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

export const poolId = (slot: number, sandboxId: string, runtime: string) => `${PREFIX}${slot}:${sandboxId}:${runtime}`;

export interface PoolStatusView {
  vms: number;
  total_users: number;
  runtimes: Array<{ runtime_id: string; users: number }>;
}

export class PoolSlots {
  /** Shared runtimes, oldest first. */
  private readonly shared: Shared[] = [];
  private loaded: Promise<void> | null = null;
  /** Serializes slot choice and runtime creation. */
  private lock: Promise<unknown> = Promise.resolve();
  private creating = 0;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly base: Provider,
    private readonly opts: SlotOptions,
  ) {}

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
  load(): Promise<void> {
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

  /** Runs `fn` alone: slot choice and runtime creation never interleave. */
  locked<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn, fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  /**
   * A slot for a new tenant: the oldest runtime with room, else a new runtime while fewer than
   * `max_vms` run; null when the pool is full.
   */
  async claim(sandboxId: string, signal?: AbortSignal): Promise<{ shared: Shared; slot: number } | null> {
    await this.load();
    return this.locked(async () => {
      for (const s of [...this.shared]) {
        if (s.retired || s.slots.size >= this.opts.settings.max_users_per_vm) continue;
        const slot = await this.nextSlot(s);
        if (slot === null) continue;
        s.slots.set(slot, sandboxId);
        return { shared: s, slot };
      }
      // Retired runtimes still count: they run until their last tenant leaves.
      if (this.shared.length + this.creating >= this.opts.settings.max_vms) return null;
      this.creating++;
      try {
        const s = await this.newRuntime(signal);
        const slot = await this.nextSlot(s);
        if (slot === null) throw new SbxError('provider_error', 'a new pool runtime got no uid for its first workspace');
        s.slots.set(slot, sandboxId);
        return { shared: s, slot };
      } finally {
        this.creating--;
      }
    });
  }

  /** Whether the slot a logical runtime id names is still its sandbox's. */
  async holds(p: { slot: number; sandbox_id: string; runtime: string }): Promise<boolean> {
    await this.load();
    const s = this.shared.find((x) => x.runtime === p.runtime);
    return s !== undefined && s.slots.get(p.slot) === p.sandbox_id;
  }

  /** The base runtimes, a shared one expanded into its workspaces (reaper, reconciliation). */
  expand(runtimes: RuntimeInfo[]): RuntimeInfo[] {
    const out: RuntimeInfo[] = [];
    for (const rt of runtimes) {
      const s = this.shared.find((x) => x.runtime === rt.runtime_id);
      if (!s) {
        out.push(rt);
        continue;
      }
      for (const [slot, sandbox] of s.slots) out.push({ ...rt, runtime_id: poolId(slot, sandbox, s.runtime), sandbox_id: sandbox });
    }
    return out;
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
  slotFreed(ms: number, signal?: AbortSignal): Promise<void> {
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
  async release(id: string | null, shared?: Shared, signal?: AbortSignal): Promise<void> {
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
}
