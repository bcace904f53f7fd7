import { formatDuration, isWholeSeconds, tryParseDuration } from '../duration.js';
import { badRequest, notFound } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, IdSource, QuotaRecord, Store } from '../ports.js';
import type { Admission } from './admission.js';
import { validateOwnerId } from './owner.js';

/** Body of a quota save; omitted or `0s` durations inherit the global default. */
export interface QuotaInput {
  max_sandboxes?: number;
  max_ttl?: string;
  max_exec_timeout?: string;
}

/** Owner quota as the API shows it (spec 2.6): durations as strings. */
export interface OwnerQuotaView {
  owner_id: string;
  max_sandboxes: number;
  max_ttl: string;
  max_exec_timeout: string;
  created_at: string;
  updated_at: string;
}

/** Spec 2.6 quota summary: counts only, no owner ids. */
export interface QuotaSummary {
  total: number;
  with_max_sandboxes: number;
  with_max_ttl: number;
  with_max_exec_timeout: number;
}

/** Spec 2.6 owner usage: the effective limits (quota over global defaults). */
export interface OwnerUsage {
  owner_id: string;
  active_sandboxes: number;
  max_sandboxes: number;
  max_ttl: string;
  max_exec_timeout: string;
  quota_configured: boolean;
}

/** Who changed a quota and through which request, for the audit history. Never carries keys. */
export interface AuditContext {
  actor: string;
  method: string;
  path: string;
  status: number;
  /** Clock time (ms) the request started, for duration_ms. */
  started_ms: number;
  request_id: string;
  remote_addr: string;
  user_agent: string;
}

export interface QuotaDeps {
  store: Store;
  bus: EventBus;
  clock: Clock;
  ids: IdSource;
  admission: Admission;
}

/** Renders a stored quota for responses. */
export function presentQuota(q: QuotaRecord): OwnerQuotaView {
  return {
    owner_id: q.owner_id,
    max_sandboxes: q.max_sandboxes,
    max_ttl: formatDuration(q.max_ttl_ms),
    max_exec_timeout: formatDuration(q.max_exec_timeout_ms),
    created_at: q.created_at,
    updated_at: q.updated_at,
  };
}

/** Owner quotas (spec 2.6, 4.4): validation, persistence, events, audit, and waking queued spawns. */
export class QuotaService {
  constructor(private readonly deps: QuotaDeps) {}

  async list(): Promise<OwnerQuotaView[]> {
    return (await this.deps.store.listQuotas()).map(presentQuota);
  }

  async summary(): Promise<QuotaSummary> {
    const all = await this.deps.store.listQuotas();
    return {
      total: all.length,
      with_max_sandboxes: all.filter((q) => q.max_sandboxes > 0).length,
      with_max_ttl: all.filter((q) => q.max_ttl_ms > 0).length,
      with_max_exec_timeout: all.filter((q) => q.max_exec_timeout_ms > 0).length,
    };
  }

  async get(ownerId: string): Promise<OwnerQuotaView> {
    const id = ownerIdOf(ownerId);
    const q = await this.deps.store.getQuota(id);
    if (!q) throw notFound(`no quota for owner ${id}`);
    return presentQuota(q);
  }

  /** Upserts (created_at kept, updated_at moved); emits `quota.saved`; audited. */
  async save(ownerId: string, input: QuotaInput, audit?: AuditContext): Promise<OwnerQuotaView> {
    const id = ownerIdOf(ownerId);
    const max_sandboxes = input.max_sandboxes ?? 0;
    if (typeof max_sandboxes !== 'number' || !Number.isInteger(max_sandboxes)) throw badRequest('max_sandboxes must be an integer');
    if (max_sandboxes < 0) throw badRequest('max_sandboxes must not be negative');
    const max_ttl_ms = quotaDuration(input.max_ttl, 'max_ttl');
    const max_exec_timeout_ms = quotaDuration(input.max_exec_timeout, 'max_exec_timeout');
    const saved = await this.deps.store.upsertQuota({
      owner_id: id,
      max_sandboxes,
      max_ttl_ms,
      max_exec_timeout_ms,
      updated_at: this.deps.clock.now().toISOString(),
    });
    const view = presentQuota(saved);
    this.deps.bus.publish({
      type: 'quota.saved',
      owner_id: id,
      data: { owner: id, max_sandboxes, max_ttl: view.max_ttl, max_exec_timeout: view.max_exec_timeout },
    });
    this.deps.admission.wake();
    if (audit) await this.audit(audit);
    return view;
  }

  /** Deletes; 404 when none; emits `quota.deleted`; audited. */
  async remove(ownerId: string, audit?: AuditContext): Promise<void> {
    const id = ownerIdOf(ownerId);
    if (!(await this.deps.store.deleteQuota(id))) throw notFound(`no quota for owner ${id}`);
    this.deps.bus.publish({ type: 'quota.deleted', owner_id: id, data: { owner: id } });
    this.deps.admission.wake();
    if (audit) await this.audit(audit);
  }

  /** Effective limits and the active count for one owner (works without a quota). */
  async usage(ownerId: string): Promise<OwnerUsage> {
    const id = ownerIdOf(ownerId);
    const limits = await this.deps.admission.limitsFor(id);
    const counts = await this.deps.admission.countActive(id);
    return {
      owner_id: id,
      active_sandboxes: counts.owner,
      max_sandboxes: limits.max_owner_sandboxes,
      max_ttl: formatDuration(limits.max_ttl_ms),
      max_exec_timeout: formatDuration(limits.max_exec_timeout_ms),
      quota_configured: limits.quota_configured,
    };
  }

  private async audit(a: AuditContext): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.store.insertAudit({
      id: this.deps.ids.randomId(16),
      created_at: now.toISOString(),
      actor: a.actor,
      method: a.method,
      path: a.path,
      status: a.status,
      duration_ms: Math.max(0, Math.round(now.getTime() - a.started_ms)),
      request_id: a.request_id,
      remote_addr: a.remote_addr,
      user_agent: a.user_agent,
    });
  }
}

function ownerIdOf(input: string): string {
  const id = validateOwnerId(input, 'owner_id');
  if (id === null) throw badRequest('owner_id is required');
  return id;
}

/** Quota duration rule (spec 2.6, 8): whole seconds, not negative; omitted or `0s` = inherit (0). */
function quotaDuration(input: string | undefined | null, field: string): number {
  if (input === undefined || input === null) return 0;
  if (typeof input !== 'string') throw badRequest(`${field} must be a duration string`);
  const ms = tryParseDuration(input);
  if (ms === null) throw badRequest(`${field}: invalid duration ${JSON.stringify(input)} (use whole seconds, e.g. 30s, 5m, 1h)`);
  if (ms < 0) throw badRequest(`${field} must not be negative`);
  if (!isWholeSeconds(ms)) throw badRequest(`${field} must be a whole number of seconds (got ${JSON.stringify(input)})`);
  return ms;
}
