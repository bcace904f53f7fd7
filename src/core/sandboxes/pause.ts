/**
 * Pause and resume (DESIGN.md §16): `paused` keeps the runtime and its memory (docker: the
 * engine's pause; mock and proot: the cgroup freezer) and counts like `running`. Explicit pause
 * and resume, the one resume-if-paused every exec, file, process and WebSocket path goes through
 * (`ensureRunning`), the auto-pause pass and the pause at the TTL of `on_expire: pause`.
 */
import { conflict, isSbxError, notFound, SbxError, unavailable } from '../errors.js';
import type { Provider, SandboxRecord } from '../ports/index.js';
import type { Caller } from './caller.js';
import { ActivityTracker } from './activity.js';
import type { SandboxDeps } from './deps.js';
import { GONE, providerNotConfigured, type SandboxLookup } from './lookup.js';
import { sandboxPages } from './pages.js';
import { expiryFrom } from './spawn.js';

/** Bound on one provider pause or resume (docker's freeze, the freezer reaching FROZEN, a worker's RPC). */
const PAUSE_TIMEOUT_MS = 30_000;
const DEFAULT_PAUSED_TTL_MS = 24 * 3_600_000;

/** What pausing reads and writes: the records, the locator that reaches runtimes, events, the clock. */
export type PauseDeps = Pick<SandboxDeps, 'store' | 'bus' | 'clock' | 'settings' | 'locator' | 'warn'>;

/** A sandbox's teardown (Teardowns.run): `retry: false` tries once. */
export type Teardown = (rec: SandboxRecord, reason: string, retry?: boolean) => Promise<void>;

export type PauseReason = 'requested' | 'auto_pause' | 'on_expire';
export type ResumeReason = 'requested' | 'activity';

export class PauseService {
  /** In-flight work and idleness of the sandboxes this node serves. */
  readonly activity: ActivityTracker;
  /** One pause or resume at a time per sandbox; a resume-if-paused joins the one under way. */
  private readonly pending = new Map<string, Promise<SandboxRecord>>();
  /** Milliseconds each resume took (for diagnostics and the benchmark); the last 100. */
  readonly resumeMs: number[] = [];

  constructor(
    private readonly deps: PauseDeps,
    private readonly lookup: SandboxLookup,
    private readonly teardown: Teardown,
  ) {
    this.activity = new ActivityTracker(deps.clock);
  }

  /** `POST …/pause`: 409 while an exec or stream is in flight; an already paused sandbox answers as is. */
  async pause(caller: Caller, id: string): Promise<SandboxRecord> {
    await this.lookup.get(id, caller);
    this.refusePool();
    return this.serialized(id, async () => {
      const cur = await this.current(id);
      if (cur.state === 'paused') return cur;
      if (cur.state !== 'running') throw unavailable(`sandbox ${id} is ${cur.state}, not running`);
      const n = this.activity.inFlight(id);
      if (n > 0)
        throw conflict(`sandbox ${id} has ${n} exec${n === 1 ? '' : 's'} or stream${n === 1 ? '' : 's'} in flight: pause it when they end`);
      return this.doPause(cur, 'requested');
    });
  }

  /** `POST …/resume`: a running sandbox answers as is. */
  async resume(caller: Caller, id: string): Promise<SandboxRecord> {
    await this.lookup.get(id, caller);
    this.refusePool();
    return this.resumeIfPaused(id, 'requested');
  }

  /**
   * The one resume-if-paused of every exec, file, process and WebSocket path: a paused sandbox is
   * resumed (one resume however many requests arrive at once); any other record is returned as is.
   */
  async ensureRunning(rec: SandboxRecord): Promise<SandboxRecord> {
    const under = this.pending.get(rec.id);
    if (rec.state !== 'paused' && !under) return rec;
    return this.resumeIfPaused(rec.id, 'activity');
  }

  /**
   * After a start: watches again every running sandbox with `auto_pause` (the idle time counts
   * from now: what came before the restart is not known), page by page.
   */
  async watchAtStart(): Promise<number> {
    let n = 0;
    for await (const rec of sandboxPages(this.deps.store, { states: ['running'] })) {
      if (!rec.auto_pause_ms) continue;
      this.watch(rec);
      n++;
    }
    return n;
  }

  /** Starts watching a new or resumed sandbox that has `auto_pause`. */
  watch(rec: SandboxRecord): void {
    if (rec.auto_pause_ms && rec.state === 'running') this.activity.watch(rec.id, rec.auto_pause_ms);
  }

  /**
   * The auto-pause pass: every watched sandbox idle for its window is paused (reason
   * `auto_pause`). A sandbox that is gone or no longer running is forgotten. Returns how many paused.
   */
  async pauseIdle(): Promise<number> {
    let n = 0;
    for (const id of this.activity.idle()) {
      const rec = await this.deps.store.getSandbox(id);
      if (!rec || rec.state !== 'running' || this.lookup.pastTtl(rec) || this.lookup.destroying(id)) {
        this.activity.unwatch(id);
        continue;
      }
      try {
        await this.serialized(id, async () => {
          const cur = await this.current(id);
          if (cur.state !== 'running' || this.activity.inFlight(id) > 0 || !this.activity.idle().includes(id)) return cur;
          return this.doPause(cur, 'auto_pause');
        });
        n++;
      } catch (err) {
        // A provider that cannot pause never will: stop watching. Others are tried next pass.
        if (isSbxError(err) && (err.code === 'not_implemented' || err.code === 'not_found')) this.activity.unwatch(id);
        this.deps.warn?.({ sandbox_id: id, err: isSbxError(err) ? err.message : String(err) }, 'auto-pause failed');
      }
    }
    return n;
  }

  /**
   * `on_expire: pause` at the TTL: the sandbox is paused and stays until its `expires_at`
   * (`pause_at` + `defaults.paused_ttl`). A provider that cannot pause destroys it, as the TTL would.
   */
  async pauseAtExpiry(rec: SandboxRecord): Promise<void> {
    try {
      await this.serialized(rec.id, async () => {
        const cur = await this.current(rec.id);
        if (cur.state !== 'running') return cur;
        return this.doPause(cur, 'on_expire');
      });
    } catch (err) {
      if (isSbxError(err) && err.code === 'not_implemented') await this.teardown(rec, 'expired', false);
      else throw err;
    }
  }

  private refusePool(): void {
    if (this.deps.settings.pool.enabled)
      throw new SbxError('not_implemented', 'pool sandboxes share one runtime with other users: pausing one would freeze its neighbours');
  }

  private async current(id: string): Promise<SandboxRecord> {
    const rec = await this.deps.store.getSandbox(id);
    if (!rec || GONE.has(rec.state) || this.lookup.pastTtl(rec) || this.lookup.destroying(id)) throw notFound(`sandbox ${id} not found`);
    return rec;
  }

  private serialized(id: string, fn: () => Promise<SandboxRecord>): Promise<SandboxRecord> {
    const before = this.pending.get(id) ?? Promise.resolve(null);
    const run = before.catch(() => null).then(fn);
    const settled = run.finally(() => {
      if (this.pending.get(id) === settled) this.pending.delete(id);
    });
    this.pending.set(id, settled);
    return settled;
  }

  private resumeIfPaused(id: string, reason: ResumeReason): Promise<SandboxRecord> {
    return this.serialized(id, async () => {
      const cur = await this.current(id);
      return cur.state === 'paused' ? this.doResume(cur, reason) : cur;
    });
  }

  private async provider(rec: SandboxRecord): Promise<{ provider: Provider; runtimeId: string }> {
    if (this.lookup.stranded(rec)) throw providerNotConfigured(rec);
    if (!rec.runtime_id) throw unavailable(`sandbox ${rec.id} has no runtime`);
    const provider = await this.deps.locator.provider(rec, PAUSE_TIMEOUT_MS);
    return { provider, runtimeId: rec.runtime_id };
  }

  private async doPause(rec: SandboxRecord, reason: PauseReason): Promise<SandboxRecord> {
    const { provider, runtimeId } = await this.provider(rec);
    if (!provider.pause) throw new SbxError('not_implemented', `provider ${rec.provider} cannot pause sandboxes`);
    await provider.pause(runtimeId, AbortSignal.timeout(PAUSE_TIMEOUT_MS));
    const now = this.deps.clock.now().toISOString();
    // Racing a destroy: the record is not written back to life.
    if (this.lookup.destroying(rec.id)) throw notFound(`sandbox ${rec.id} not found`);
    const updated = await this.deps.store.updateSandbox(rec.id, { state: 'paused', updated_at: now });
    if (!updated || GONE.has(updated.state)) throw notFound(`sandbox ${rec.id} not found`);
    this.activity.unwatch(rec.id);
    this.deps.bus.publish({
      type: 'sandbox.paused',
      sandbox_id: rec.id,
      owner_id: rec.owner_id ?? undefined,
      worker_id: rec.worker_id,
      data: { reason, provider: rec.provider, expires_at: updated.expires_at },
    });
    return updated;
  }

  private async doResume(rec: SandboxRecord, reason: ResumeReason): Promise<SandboxRecord> {
    const started = performance.now();
    const { provider, runtimeId } = await this.provider(rec);
    if (!provider.resume) throw new SbxError('not_implemented', `provider ${rec.provider} cannot resume sandboxes`);
    await provider.resume(runtimeId, AbortSignal.timeout(PAUSE_TIMEOUT_MS));
    const now = this.deps.clock.now();
    // `on_expire: pause`: a resume gives a fresh TTL, and the paused life after it.
    const fresh = rec.on_expire === 'pause' && rec.ttl_ms ? this.ttlPatch(rec, now, rec.ttl_ms) : {};
    const patch: Partial<SandboxRecord> = { ...fresh, state: 'running', updated_at: now.toISOString() };
    if (this.lookup.destroying(rec.id)) throw notFound(`sandbox ${rec.id} not found`);
    const updated = await this.deps.store.updateSandbox(rec.id, patch);
    if (!updated || GONE.has(updated.state)) throw notFound(`sandbox ${rec.id} not found`);
    if (patch.expires_at) await this.deps.locator.expiryMoved(updated);
    this.watch(updated);
    const ms = performance.now() - started;
    this.resumeMs.push(ms);
    if (this.resumeMs.length > 100) this.resumeMs.shift();
    this.deps.bus.publish({
      type: 'sandbox.resumed',
      sandbox_id: rec.id,
      owner_id: rec.owner_id ?? undefined,
      worker_id: rec.worker_id,
      data: { reason, provider: rec.provider, duration_ms: Math.round(ms * 1000) / 1000, expires_at: updated.expires_at },
    });
    return updated;
  }

  /**
   * The patch of a new TTL from `now` (extend, and a resume of `on_expire: pause`): `expires_at`,
   * or with `on_expire: pause` the pause at the TTL and the paused life after it (DESIGN.md §16).
   */
  ttlPatch(rec: SandboxRecord, now: Date, ttlMs: number): Partial<SandboxRecord> {
    if (rec.on_expire !== 'pause') return { expires_at: expiryFrom(now, ttlMs), updated_at: now.toISOString() };
    return {
      pause_at: expiryFrom(now, ttlMs),
      ttl_ms: ttlMs,
      expires_at: expiryFrom(now, ttlMs + this.pausedTtlMs()),
      updated_at: now.toISOString(),
    };
  }

  /** `defaults.paused_ttl` in ms. */
  pausedTtlMs(): number {
    return this.deps.settings.defaults.paused_ttl_ms ?? DEFAULT_PAUSED_TTL_MS;
  }
}
