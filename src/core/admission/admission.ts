import { formatDuration } from '../../shared/duration.js';
import { SbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, QuotaStore, SandboxStore, SlotLedgerPort } from '../ports/index.js';
import type { CoreSettings } from '../settings.js';
import { LocalLedger, SharedLedger, type AdmissionTicket, type Counts, type Ledger } from './ledger.js';
import { SpawnQueue, type Waiter } from './queue.js';
import { limitsSnapshot, QueueCounters, schedulerStats, type LimitsSnapshot, type PlacementFigures, type SchedulerStats } from './stats.js';

export interface AdmissionRequest {
  owner_id: string | null;
  ttl_ms: number;
}

/** Spec 2.7. */
export interface AdmissionDecision {
  allowed: boolean;
  queueable: boolean;
  reason?: string;
  active_sandboxes: number;
  max_sandboxes: number;
  active_owner_sandboxes: number;
  max_owner_sandboxes: number;
  max_ttl: string;
}

export type { AdmissionTicket } from './ledger.js';

/** Effective limits for one owner: a quota overrides the global defaults (0 = inherit). */
export interface EffectiveLimits {
  max_sandboxes: number;
  max_owner_sandboxes: number;
  max_ttl_ms: number;
  max_exec_timeout_ms: number;
  quota_configured: boolean;
}

/** The counts of a decision no limit applies to (nothing was counted). */
const UNCOUNTED: Counts = { total: 0, byOwner: new Map(), nextExpiryMs: null };

/** Admission across replicas: the shared slot ledger, this replica's id and slot ids. */
export interface SharedAdmission {
  slots: SlotLedgerPort;
  replicaId: string;
  slotId: () => string;
}

/** Events after which a queued spawn may fit. */
const WAKE_EVENTS = new Set(['sandbox.destroyed', 'sandbox.error', 'quota.saved', 'quota.deleted']);
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Spawn admission (spec 2.7, 3.4): one decision function for spawn, template spawn and the preflight
 * route. `admit` is serialized and counts granted-but-not-yet-stored slots, so concurrent spawns
 * cannot over-admit. In `queue` mode a capacity denial waits in a FIFO queue that is re-evaluated
 * whenever capacity may have opened (destroy, expiry, a failed spawn, a quota change).
 */
export class Admission {
  private chain: Promise<unknown> = Promise.resolve();
  private readonly ledger: Ledger;
  private readonly queue: SpawnQueue<AdmissionRequest, AdmissionTicket>;
  private readonly counters = new QueueCounters();
  private pumpScheduled = false;
  private expiryTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly unsubscribe: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly store: SandboxStore & QuotaStore,
    private readonly settings: CoreSettings,
    private readonly clock: Clock,
    private readonly bus?: EventBus,
    shared?: SharedAdmission,
  ) {
    const wake = () => this.wake();
    this.ledger = shared
      ? new SharedLedger(shared.slots, store, clock, shared.replicaId, shared.slotId, wake)
      : new LocalLedger(store, clock, (fn) => this.serialize(fn), wake);
    this.queue = new SpawnQueue(
      () => settings.defaults.spawn_queue_timeout_ms,
      () => clock.now().getTime(),
    );
    this.unsubscribe = bus?.subscribe((e) => {
      if (WAKE_EVENTS.has(e.type)) this.wake();
    });
  }

  async limitsFor(ownerId: string | null): Promise<EffectiveLimits> {
    const d = this.settings.defaults;
    const quota = ownerId ? await this.store.getQuota(ownerId) : null;
    return {
      max_sandboxes: d.max_sandboxes,
      max_owner_sandboxes: quota && quota.max_sandboxes > 0 ? quota.max_sandboxes : d.max_sandboxes_per_owner,
      max_ttl_ms: quota && quota.max_ttl_ms > 0 ? quota.max_ttl_ms : d.max_ttl_ms,
      max_exec_timeout_ms: quota && quota.max_exec_timeout_ms > 0 ? quota.max_exec_timeout_ms : d.max_exec_timeout_ms,
      quota_configured: quota !== null,
    };
  }

  /** Active sandboxes in total and for one owner, including granted slots not yet stored. */
  async countActive(ownerId: string | null): Promise<{ total: number; owner: number }> {
    const c = await this.ledger.count([ownerId]);
    return { total: c.total, owner: ownerId ? (c.byOwner.get(ownerId) ?? 0) : 0 };
  }

  /** Evaluates the request without reserving anything (preflight). */
  async decide(req: AdmissionRequest): Promise<AdmissionDecision> {
    const limits = await this.limitsFor(req.owner_id);
    return this.evaluate(req, limits, await this.ledger.count([req.owner_id]));
  }

  /**
   * Serialized decide-and-reserve. Throws the typed denial; in `queue` mode a capacity denial waits
   * for a slot instead. The signal takes a waiting spawn out of the queue (client went away).
   */
  async admit(req: AdmissionRequest, signal?: AbortSignal): Promise<AdmissionTicket> {
    const step = await this.serialize(async (): Promise<{ ticket: AdmissionTicket } | { wait: Promise<AdmissionTicket> }> => {
      if (this.closed) throw new SbxError('unavailable', 'server is shutting down');
      // Waiters first: a newcomer never overtakes a queued spawn that now fits.
      await this.pumpLocked();
      const limits = await this.limitsFor(req.owner_id);
      // Counted only when a limit can use the count: with no cap the decision needs none.
      const capped =
        limits.max_sandboxes > 0 ||
        (req.owner_id !== null && limits.max_owner_sandboxes > 0) ||
        (limits.max_ttl_ms > 0 && req.ttl_ms > limits.max_ttl_ms);
      const { counts, ticket } = capped
        ? await this.ledger.tryReserve(req.owner_id, [req.owner_id], (c) => this.evaluate(req, limits, c).allowed)
        : { counts: UNCOUNTED, ticket: this.ledger.grant(req.owner_id) };
      if (ticket) return { ticket };
      const decision = this.evaluate(req, limits, counts);
      if (!decision.queueable) {
        this.publishLimit(decision.reason ?? 'limit', req.owner_id, { decision, action: 'rejected' });
        throw denial(decision);
      }
      const wait = this.enqueue(req, decision, signal);
      this.armExpiryTimer(counts);
      return { wait };
    });
    return 'ticket' in step ? step.ticket : step.wait;
  }

  /** Re-evaluates the queue soon (capacity may have opened). Cheap and coalesced. */
  wake(): void {
    if (this.closed || this.queue.depth === 0 || this.pumpScheduled) return;
    this.pumpScheduled = true;
    void this.serialize(async () => {
      this.pumpScheduled = false;
      await this.pumpLocked();
    }).catch(() => undefined);
  }

  /** Diagnostics `scheduler` member (spec 2.15), with the last placement the locator made. */
  stats(placement: PlacementFigures): SchedulerStats {
    return schedulerStats(this.settings, this.counters, this.queue.depth, placement);
  }

  /** Diagnostics `limits` member (spec 2.15). */
  limitsSnapshot(): LimitsSnapshot {
    return limitsSnapshot(this.settings);
  }

  /** Fails every queued spawn and stops listening; later admits fail with `unavailable`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.unsubscribe?.();
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.queue.failAll(new SbxError('unavailable', 'server is shutting down'));
  }

  // ------------------------------------------------------------------ internals

  private serialize<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn);
    this.chain = run.catch(() => undefined);
    return run;
  }

  /** The decision rule, on counts that include granted slots. */
  private evaluate(req: AdmissionRequest, limits: EffectiveLimits, counts: Counts): AdmissionDecision {
    const total = counts.total;
    const owner = req.owner_id ? (counts.byOwner.get(req.owner_id) ?? 0) : 0;
    const base = {
      active_sandboxes: total,
      max_sandboxes: limits.max_sandboxes,
      active_owner_sandboxes: owner,
      max_owner_sandboxes: limits.max_owner_sandboxes,
      max_ttl: formatDuration(limits.max_ttl_ms),
    };
    const queueMode = this.settings.defaults.spawn_overflow === 'queue';
    if (limits.max_ttl_ms > 0 && req.ttl_ms > limits.max_ttl_ms) {
      return { allowed: false, queueable: false, reason: 'max_ttl', ...base };
    }
    if (limits.max_sandboxes > 0 && total >= limits.max_sandboxes) {
      return { allowed: false, queueable: queueMode, reason: 'max_sandboxes', ...base };
    }
    if (req.owner_id && limits.max_owner_sandboxes > 0 && owner >= limits.max_owner_sandboxes) {
      return { allowed: false, queueable: queueMode, reason: 'max_sandboxes_per_owner', ...base };
    }
    return { allowed: true, queueable: false, ...base };
  }

  /** Called inside the serialized section: queues the spawn or fails at once when the queue is full. */
  private enqueue(req: AdmissionRequest, decision: AdmissionDecision, signal?: AbortSignal): Promise<AdmissionTicket> {
    const d = this.settings.defaults;
    if (this.queue.depth >= d.max_spawn_queue) {
      this.publishLimit(decision.reason ?? 'limit', req.owner_id, { decision, action: 'queue_full' });
      throw new SbxError('resource_limit', `spawn queue is full (${this.queue.depth}/${d.max_spawn_queue} waiting)`, {
        reason: 'spawn_queue_full',
        queue_depth: this.queue.depth,
        max_spawn_queue: d.max_spawn_queue,
        decision,
      });
    }
    if (signal?.aborted) throw new SbxError('unavailable', 'spawn cancelled before it was queued');
    const timeout = formatDuration(d.spawn_queue_timeout_ms);
    const owner = req.owner_id ?? undefined;
    const { done } = this.queue.enqueue(req, signal, {
      onTimeout: (w) => {
        const waited = this.waitedMs(w);
        this.counters.timeouts++;
        this.counters.recordWait(waited);
        this.bus?.publish({
          type: 'spawn.queue_timeout',
          owner_id: owner,
          data: { owner: req.owner_id, reason: decision.reason, wait_ms: waited, timeout, queue_depth: this.queue.depth },
        });
        this.publishLimit('spawn_queue_timeout', req.owner_id, { wait_ms: waited, timeout });
        return new SbxError('resource_limit', `spawn waited ${timeout} in the queue without capacity`, {
          reason: 'spawn_queue_timeout',
          spawn_queue_timeout: timeout,
          wait_ms: waited,
        });
      },
      onCancel: () => new SbxError('unavailable', 'spawn cancelled while queued'),
    });
    this.counters.queued++;
    this.publishLimit(decision.reason ?? 'limit', req.owner_id, { decision, action: 'queued' });
    this.bus?.publish({
      type: 'spawn.queued',
      owner_id: owner,
      data: { owner: req.owner_id, reason: decision.reason, queue_depth: this.queue.depth, timeout },
    });
    return done;
  }

  /** Admits queued spawns that now fit, oldest first. Runs inside the serialized section. */
  private async pumpLocked(): Promise<void> {
    if (this.queue.depth === 0) return;
    let last: Counts | null = null;
    try {
      const limits = new Map<string | null, EffectiveLimits>();
      for (const w of this.queue.list()) {
        if (w.settled) continue;
        const owner = w.req.owner_id;
        let l = limits.get(owner);
        if (!l) {
          l = await this.limitsFor(owner);
          limits.set(owner, l);
        }
        if (w.settled) continue; // timed out or cancelled while the quota was read
        const lim = l;
        // Each waiter counts and reserves on its own: another replica may admit in between.
        const { counts, ticket } = await this.ledger.tryReserve(owner, [owner], (c) => this.evaluate(w.req, lim, c).allowed);
        last = counts;
        if (ticket) {
          if (w.settled)
            ticket.release(); // timed out or cancelled meanwhile
          else this.dequeue(w, ticket);
          continue;
        }
        const d = this.evaluate(w.req, lim, counts);
        if (!d.queueable) {
          // A quota change lowered the TTL limit below this request: it can never fit now.
          this.publishLimit(d.reason ?? 'limit', owner, { decision: d, action: 'rejected' });
          w.fail(denial(d));
          continue;
        }
        // Nobody behind a global-capacity denial fits either; an owner-limit denial blocks only that owner.
        if (d.reason === 'max_sandboxes') break;
      }
    } catch {
      // Store trouble: waiters stay queued; the next wake or their timeout settles them.
    }
    this.armExpiryTimer(last);
  }

  private dequeue(w: Waiter<AdmissionRequest, AdmissionTicket>, ticket: AdmissionTicket): void {
    const waited = this.waitedMs(w);
    w.admit(ticket);
    this.counters.dequeued++;
    this.counters.recordWait(waited);
    this.bus?.publish({
      type: 'spawn.dequeued',
      owner_id: w.req.owner_id ?? undefined,
      data: { owner: w.req.owner_id, wait_ms: waited, wait: formatDuration(waited), queue_depth: this.queue.depth },
    });
  }

  /** Expiry frees capacity without any event: wake when the earliest active sandbox expires. */
  private armExpiryTimer(snap: Counts | null): void {
    if (this.expiryTimer) clearTimeout(this.expiryTimer);
    this.expiryTimer = undefined;
    if (this.closed || this.queue.depth === 0) return;
    // With replicas, capacity also opens on another replica without an event here: the ledger
    // says how soon to look again regardless.
    const expiry = snap?.nextExpiryMs == null ? null : Math.max(0, snap.nextExpiryMs - this.clock.now().getTime()) + 5;
    if (expiry === null && this.ledger.recheckMs === null) return;
    this.expiryTimer = setTimeout(() => this.wake(), Math.min(expiry ?? Infinity, this.ledger.recheckMs ?? Infinity, MAX_TIMER_MS));
    this.expiryTimer.unref?.();
  }

  private waitedMs(w: Waiter<AdmissionRequest, AdmissionTicket>): number {
    return Math.max(0, this.clock.now().getTime() - w.enqueuedAt);
  }

  private publishLimit(reason: string, ownerId: string | null, extra: Record<string, unknown>): void {
    this.bus?.publish({ type: 'resource.limit', owner_id: ownerId ?? undefined, data: { reason, owner: ownerId, ...extra } });
  }
}

/** The typed error for a denied decision (DESIGN.md §3: global capacity → 503, owner/TTL → 429). */
export function denial(d: AdmissionDecision): SbxError {
  const details = { reason: d.reason, decision: d };
  switch (d.reason) {
    case 'max_ttl':
      return new SbxError('resource_limit', `ttl exceeds the maximum of ${d.max_ttl}`, details);
    case 'max_sandboxes':
      return new SbxError('unavailable', `sandbox capacity reached (${d.active_sandboxes}/${d.max_sandboxes} active)`, details);
    case 'max_sandboxes_per_owner':
      return new SbxError(
        'resource_limit',
        `owner sandbox limit reached (${d.active_owner_sandboxes}/${d.max_owner_sandboxes} active)`,
        details,
      );
    default:
      return new SbxError('resource_limit', `spawn not admitted: ${d.reason ?? 'limit'}`, details);
  }
}
