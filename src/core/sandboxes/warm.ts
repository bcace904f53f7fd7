/**
 * Warm pools (DESIGN.md §11): runtimes started ahead of demand, per shape (provider, image,
 * memory_mb, vcpus, network), so a matching spawn answers without a provider start. Targets come
 * from `defaults.warm` (the default shape) and each template's `warm`. Warm runtimes are started
 * in the background by this node's own providers, owned by nobody, recorded in the store (so a
 * restart adopts them and reconciliation keeps them), and counted against `max_sandboxes`: the
 * pool fills only into free capacity and gives a runtime back when a spawn of another shape
 * needs the room. A spawn claims one in one store statement, so no two spawns share one.
 */
import { isSbxError, SbxError } from '../errors.js';
import type { Clock, IdSource, Provider, SandboxStore, TemplateStore, WarmRecord, WarmStore } from '../ports/index.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { CoreSettings } from '../settings.js';
import type { ResolvedSpawn, SpawnInput } from './spawn-request.js';

export interface WarmShape {
  provider: string;
  image: string;
  memory_mb: number;
  vcpus: number;
  network: string | null;
}

export interface WarmShapeStats {
  shape: WarmShape;
  ready: number;
  target: number;
  hits: number;
  misses: number;
}

export interface WarmDeps {
  store: WarmStore & Pick<SandboxStore, 'countLive'> & Pick<TemplateStore, 'listTemplates'>;
  providers: ProviderRegistry;
  settings: CoreSettings;
  clock: Clock;
  ids: IdSource;
  /** Applies defaults the way a spawn does (SandboxService.resolveSpawn). */
  resolve: (input: SpawnInput) => Promise<ResolvedSpawn>;
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

/** How often the pool looks for runtimes to start (and for its targets again). */
const REFILL_EVERY_MS = 1_000;
/** Bound on one provider call of the pool. */
const CALL_TIMEOUT_MS = 120_000;
/** Tries of claims whose runtime turned out dead before a spawn goes the cold way. */
const CLAIM_TRIES = 3;

export function shapeKey(s: WarmShape): string {
  return JSON.stringify([s.provider, s.image, s.memory_mb, s.vcpus, s.network ?? '']);
}

function shapeOf(req: Pick<ResolvedSpawn, 'provider' | 'image' | 'memory_mb' | 'vcpus' | 'network'>): WarmShape {
  return { provider: req.provider, image: req.image, memory_mb: req.memory_mb, vcpus: req.vcpus, network: req.network };
}

export class WarmPool {
  private targets = new Map<string, { shape: WarmShape; target: number }>();
  private readonly counters = new Map<string, { hits: number; misses: number }>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private filling: Promise<void> | null = null;
  private closed = false;
  /** Failures per shape in a row: a shape that cannot start waits longer before the next try. */
  private readonly failures = new Map<string, { n: number; until: number }>();
  /**
   * True when the last refill found no target and no warm runtime of this node: only a refill starts
   * one, so until the next one none exists and a cold spawn has no room to make (no store read).
   */
  private noneWarm = false;

  constructor(private readonly deps: WarmDeps) {}

  private get workerId(): string {
    return this.deps.settings.worker_id;
  }

  /** Whether warm pools can run here at all: local providers, not pool mode. */
  get enabled(): boolean {
    return !this.deps.settings.pool.enabled;
  }

  /** Starts the background refill (and adopts what a previous run left). */
  async start(): Promise<void> {
    if (!this.enabled) return;
    await this.adopt();
    this.timer = setInterval(() => this.kick(), REFILL_EVERY_MS);
    this.timer.unref?.();
    this.kick();
  }

  /** Starts a refill pass unless one runs. */
  kick(): void {
    if (this.closed || this.filling !== null) return;
    this.filling = this.refill()
      .catch((err: unknown) => this.deps.warn?.({ err: isSbxError(err) ? err.message : String(err) }, 'warm pool refill failed'))
      .finally(() => (this.filling = null));
  }

  /**
   * A warm runtime for this spawn, taken out of the pool, or null (then it starts cold). Only for
   * spawns on this node with nothing a warm runtime could not have: no snapshot, no volumes.
   */
  async claim(req: ResolvedSpawn): Promise<WarmRecord | null> {
    if (!this.enabled || this.closed || req.snapshot !== null || req.volumes.length > 0) return null;
    const key = shapeKey(shapeOf(req));
    if (!this.targets.has(key)) return null;
    const provider = this.deps.providers.get(req.provider);
    const count = this.count(key);
    for (let i = 0; i < CLAIM_TRIES; i++) {
      const rec = await this.deps.store.claimWarm(key, this.workerId);
      if (!rec) break;
      // A runtime killed from outside since it was started is thrown away, not handed out.
      const alive = await provider.status(rec.runtime_id, AbortSignal.timeout(5_000)).then(
        (s) => s === 'running',
        () => false,
      );
      if (alive) {
        count.hits++;
        this.kick();
        return rec;
      }
      await provider.destroy(rec.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS)).catch(() => undefined);
    }
    count.misses++;
    this.kick();
    return null;
  }

  /**
   * Before a cold spawn on this node: when live sandboxes and warm runtimes fill `max_sandboxes`,
   * one warm runtime (the oldest of the fullest shape) gives its room back.
   */
  async makeRoom(): Promise<void> {
    const max = this.deps.settings.defaults.max_sandboxes;
    if (!this.enabled || max <= 0 || this.noneWarm) return;
    const warm = await this.deps.store.listWarm(this.workerId);
    if (warm.length === 0) return;
    const live = (await this.deps.store.countLive(this.deps.clock.now().toISOString(), [])).total;
    if (live + warm.length < max) return;
    const byShape = new Map<string, WarmRecord[]>();
    for (const w of warm) byShape.set(w.shape, [...(byShape.get(w.shape) ?? []), w]);
    const fullest = [...byShape.values()].sort((a, b) => b.length - a.length)[0]!;
    await this.discard(fullest[0]!);
  }

  stats(): WarmShapeStats[] {
    return [...this.targets.entries()].map(([key, t]) => ({
      shape: t.shape,
      ready: this.readyCount.get(key) ?? 0,
      target: t.target,
      ...this.count(key),
    }));
  }

  /** Stops refilling; destroys the warm runtimes when `defaults.warm_destroy_on_shutdown`, else leaves them for the next start. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    await this.filling;
    if (!this.deps.settings.defaults.warm_destroy_on_shutdown) return;
    for (const w of await this.deps.store.listWarm(this.workerId)) await this.discard(w);
  }

  // ---------------------------------------------------------------- filling

  private readonly readyCount = new Map<string, number>();

  private count(key: string): { hits: number; misses: number } {
    let c = this.counters.get(key);
    if (!c) this.counters.set(key, (c = { hits: 0, misses: 0 }));
    return c;
  }

  /** The targets now: `defaults.warm` for the default shape, each template's `warm` for its shape (the larger where they meet). */
  private async loadTargets(): Promise<void> {
    const next = new Map<string, { shape: WarmShape; target: number }>();
    const add = async (input: SpawnInput, target: number, what: string) => {
      if (target <= 0) return;
      try {
        const shape = shapeOf(await this.deps.resolve(input));
        if (shape.network === 'filtered')
          throw new SbxError('not_implemented', 'filtered sandboxes are not kept warm (their rules must exist before their first packet)');
        if (!this.deps.providers.has(shape.provider)) return; // runs on a worker: not warmed here
        const key = shapeKey(shape);
        next.set(key, { shape, target: Math.max(target, next.get(key)?.target ?? 0) });
      } catch (err) {
        this.deps.warn?.({ what, err: isSbxError(err) ? err.message : String(err) }, 'warm pool: this shape cannot be warmed');
      }
    };
    await add({}, this.deps.settings.defaults.warm ?? 0, 'defaults.warm');
    for (const t of await this.deps.store.listTemplates()) {
      if (!t.warm || t.snapshot || (t.volumes && t.volumes.length > 0)) continue;
      await add(
        {
          image: t.image ?? undefined,
          memory_mb: t.memory_mb ?? undefined,
          vcpus: t.vcpus ?? undefined,
          provider: t.provider ?? undefined,
          network: t.network ?? undefined,
        },
        t.warm,
        `template ${t.name}`,
      );
    }
    this.targets = next;
  }

  /** One pass: targets again, then runtimes started one at a time until each shape has its target or capacity is full. */
  private async refill(): Promise<void> {
    await this.loadTargets();
    const warm = await this.deps.store.listWarm(this.workerId);
    const ready = new Map<string, number>();
    for (const w of warm) ready.set(w.shape, (ready.get(w.shape) ?? 0) + 1);
    // Shapes no longer wanted (a template deleted, a target lowered) give their runtimes back.
    const surplus = new Map<string, number>();
    for (const [key, n] of ready) surplus.set(key, n - (this.targets.get(key)?.target ?? 0));
    for (const w of [...warm].reverse()) {
      const extra = surplus.get(w.shape) ?? 0;
      if (extra <= 0) continue;
      surplus.set(w.shape, extra - 1);
      ready.set(w.shape, (ready.get(w.shape) ?? 1) - 1);
      await this.discard(w);
    }
    this.readyCount.clear();
    for (const [k, n] of ready) this.readyCount.set(k, n);
    let total = [...ready.values()].reduce((a, b) => a + b, 0);
    this.noneWarm = total === 0 && this.targets.size === 0;
    for (const [key, { shape, target }] of this.targets) {
      while (!this.closed && (ready.get(key) ?? 0) < target) {
        const fail = this.failures.get(key);
        if (fail && performance.now() < fail.until) break;
        if (!(await this.hasRoom(total))) return;
        if (!(await this.startOne(key, shape))) break;
        ready.set(key, (ready.get(key) ?? 0) + 1);
        this.readyCount.set(key, ready.get(key)!);
        total++;
      }
    }
  }

  private async hasRoom(warmTotal: number): Promise<boolean> {
    const max = this.deps.settings.defaults.max_sandboxes;
    if (max <= 0) return true;
    const live = (await this.deps.store.countLive(this.deps.clock.now().toISOString(), [])).total;
    return live + warmTotal < max;
  }

  private async startOne(key: string, shape: WarmShape): Promise<boolean> {
    let provider: Provider;
    try {
      provider = this.deps.providers.get(shape.provider);
    } catch {
      return false;
    }
    const sandboxId = this.deps.ids.sandboxId();
    let runtime: { runtime_id: string; network?: string };
    try {
      runtime = await provider.spawn(
        {
          sandbox_id: sandboxId,
          image: shape.image,
          memory_mb: shape.memory_mb,
          vcpus: shape.vcpus,
          metadata: {},
          owner_id: null,
          ...(shape.network ? { network: shape.network as 'none' | 'bridge' } : {}),
        },
        AbortSignal.timeout(CALL_TIMEOUT_MS),
      );
    } catch (err) {
      const n = (this.failures.get(key)?.n ?? 0) + 1;
      // 2 s, 4 s, … up to a minute between tries of a shape that cannot start.
      this.failures.set(key, { n, until: performance.now() + Math.min(60_000, 1000 * 2 ** n) });
      if (n === 1)
        this.deps.warn?.(
          { provider: shape.provider, image: shape.image, err: isSbxError(err) ? err.message : String(err) },
          'warm pool could not start a runtime; retrying with backoff',
        );
      return false;
    }
    this.failures.delete(key);
    try {
      await this.deps.store.insertWarm({
        sandbox_id: sandboxId,
        shape: key,
        provider: shape.provider,
        runtime_id: runtime.runtime_id,
        network: runtime.network ?? shape.network,
        worker_id: this.workerId,
        created_at: this.deps.clock.now().toISOString(),
      });
    } catch (err) {
      // Never a runtime nobody knows about.
      await provider.destroy(runtime.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS)).catch(() => undefined);
      throw err;
    }
    return true;
  }

  /** Removes a warm runtime from the pool (the row first: a claim can no longer get it) and destroys it. */
  private async discard(w: WarmRecord): Promise<void> {
    if (!(await this.deps.store.deleteWarm(w.sandbox_id))) return;
    try {
      await this.deps.providers.get(w.provider).destroy(w.runtime_id, AbortSignal.timeout(CALL_TIMEOUT_MS));
    } catch (err) {
      this.deps.warn?.(
        { runtime_id: w.runtime_id, err: isSbxError(err) ? err.message : String(err) },
        'warm pool could not destroy a runtime; reconciliation removes it',
      );
    }
  }

  /** After a start: warm rows of this node whose runtime is gone (or whose provider is not run here) are dropped. */
  private async adopt(): Promise<void> {
    for (const w of await this.deps.store.listWarm(this.workerId)) {
      if (!this.deps.providers.has(w.provider)) {
        await this.deps.store.deleteWarm(w.sandbox_id);
        continue;
      }
      const status = await this.deps.providers
        .get(w.provider)
        .status(w.runtime_id, AbortSignal.timeout(30_000))
        .catch(() => 'unknown' as const);
      if (status === 'missing') await this.deps.store.deleteWarm(w.sandbox_id);
      else if (status === 'stopped') await this.discard(w);
    }
  }
}
