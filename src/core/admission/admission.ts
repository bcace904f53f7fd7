import { formatDuration } from '../duration.js';
import { SbxError } from '../errors.js';
import type { Clock, SandboxRecord, Store } from '../ports.js';
import type { CoreSettings } from '../settings.js';

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

/** A granted slot: counted as active until released (after the sandbox is stored, or on failure). */
export interface AdmissionTicket {
  release(): void;
}

/** Effective limits for one owner: a quota overrides the global defaults (0 = inherit). */
export interface EffectiveLimits {
  max_sandboxes: number;
  max_owner_sandboxes: number;
  max_ttl_ms: number;
  max_exec_timeout_ms: number;
  quota_configured: boolean;
}

/** A sandbox counts against limits while it is running or unhealthy and not past its TTL. */
export function isActive(rec: SandboxRecord, now: Date): boolean {
  return (rec.state === 'running' || rec.state === 'unhealthy') && Date.parse(rec.expires_at) > now.getTime();
}

/**
 * Spawn admission (spec 3.4): one decision function for spawn, template spawn and the preflight
 * route. `admit` is serialized and counts granted-but-not-yet-stored slots, so concurrent spawns
 * cannot over-admit.
 */
export class Admission {
  private chain: Promise<unknown> = Promise.resolve();
  private pending = new Map<string, number>();
  private pendingTotal = 0;

  constructor(
    private readonly store: Store,
    private readonly settings: CoreSettings,
    private readonly clock: Clock,
  ) {}

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

  async countActive(ownerId: string | null): Promise<{ total: number; owner: number }> {
    const now = this.clock.now();
    const active = (await this.store.listSandboxes({ states: ['running', 'unhealthy'] })).filter((r) => isActive(r, now));
    const owner = ownerId ? active.filter((r) => r.owner_id === ownerId).length : 0;
    return {
      total: active.length + this.pendingTotal,
      owner: owner + (ownerId ? (this.pending.get(ownerId) ?? 0) : 0),
    };
  }

  /** Evaluates the request without reserving anything (preflight). */
  async decide(req: AdmissionRequest): Promise<AdmissionDecision> {
    const limits = await this.limitsFor(req.owner_id);
    const counts = await this.countActive(req.owner_id);
    const base = {
      active_sandboxes: counts.total,
      max_sandboxes: limits.max_sandboxes,
      active_owner_sandboxes: counts.owner,
      max_owner_sandboxes: limits.max_owner_sandboxes,
      max_ttl: formatDuration(limits.max_ttl_ms),
    };
    const queueMode = this.settings.defaults.spawn_overflow === 'queue';
    if (limits.max_ttl_ms > 0 && req.ttl_ms > limits.max_ttl_ms) {
      return { allowed: false, queueable: false, reason: 'max_ttl', ...base };
    }
    if (limits.max_sandboxes > 0 && counts.total >= limits.max_sandboxes) {
      return { allowed: false, queueable: queueMode, reason: 'max_sandboxes', ...base };
    }
    if (req.owner_id && limits.max_owner_sandboxes > 0 && counts.owner >= limits.max_owner_sandboxes) {
      return { allowed: false, queueable: queueMode, reason: 'max_sandboxes_per_owner', ...base };
    }
    return { allowed: true, queueable: false, ...base };
  }

  /** Serialized decide-and-reserve. Throws the typed denial. The signal cancels a queued wait. */
  admit(req: AdmissionRequest, _signal?: AbortSignal): Promise<AdmissionTicket> {
    const run = this.chain.then(async () => {
      const decision = await this.decide(req);
      if (!decision.allowed) throw denial(decision);
      return this.reserve(req.owner_id);
    });
    this.chain = run.catch(() => undefined);
    return run;
  }

  private reserve(ownerId: string | null): AdmissionTicket {
    this.pendingTotal++;
    if (ownerId) this.pending.set(ownerId, (this.pending.get(ownerId) ?? 0) + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.pendingTotal--;
        if (ownerId) {
          const n = (this.pending.get(ownerId) ?? 1) - 1;
          if (n <= 0) this.pending.delete(ownerId);
          else this.pending.set(ownerId, n);
        }
      },
    };
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
