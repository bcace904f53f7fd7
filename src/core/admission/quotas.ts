import { parseDuration } from '../duration.js';
import { formatDuration, isWholeSeconds } from '../../shared/duration.js';
import { badRequest, notFound } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, QuotaRecord, QuotaStore } from '../ports/index.js';
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

/** Both stores keep max_sandboxes in a 32-bit INTEGER column. */
const MAX_QUOTA_SANDBOXES = 2_147_483_647;

export interface QuotaDeps {
  store: QuotaStore;
  bus: EventBus;
  clock: Clock;
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

/**
 * Owner quotas (spec 2.6, 4.4): validation, persistence, events, and waking queued spawns. The
 * audit history records saves and deletes at the HTTP edge, refused attempts included.
 */
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

  /** Upserts (created_at kept, updated_at moved); emits `quota.saved`. */
  async save(ownerId: string, input: QuotaInput): Promise<OwnerQuotaView> {
    const id = ownerIdOf(ownerId);
    const max_sandboxes = input.max_sandboxes ?? 0;
    if (typeof max_sandboxes !== 'number' || !Number.isInteger(max_sandboxes)) throw badRequest('max_sandboxes must be an integer');
    if (max_sandboxes < 0) throw badRequest('max_sandboxes must not be negative');
    if (max_sandboxes > MAX_QUOTA_SANDBOXES) throw badRequest(`max_sandboxes must be at most ${MAX_QUOTA_SANDBOXES}`);
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
    return view;
  }

  /** Deletes; 404 when none; emits `quota.deleted`. */
  async remove(ownerId: string): Promise<void> {
    const id = ownerIdOf(ownerId);
    if (!(await this.deps.store.deleteQuota(id))) throw notFound(`no quota for owner ${id}`);
    this.deps.bus.publish({ type: 'quota.deleted', owner_id: id, data: { owner: id } });
    this.deps.admission.wake();
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
}

function ownerIdOf(input: string): string {
  const id = validateOwnerId(input, 'owner_id');
  if (id === null) throw badRequest('owner_id is required');
  return id;
}

/**
 * Quota duration rule (spec 2.6, 8): whole seconds, not negative; omitted or `0s` = inherit (0).
 * parseDuration refuses malformed and absurdly long durations, so what is stored stays exact.
 */
function quotaDuration(input: string | undefined | null, field: string): number {
  if (input === undefined || input === null) return 0;
  if (typeof input !== 'string') throw badRequest(`${field} must be a duration string`);
  const ms = parseDuration(input, field);
  if (ms < 0) throw badRequest(`${field} must not be negative`);
  if (!isWholeSeconds(ms)) throw badRequest(`${field} must be a whole number of seconds (got ${JSON.stringify(input)})`);
  return ms;
}
