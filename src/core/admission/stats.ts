import { formatDuration } from '../../shared/duration.js';
import type { CoreSettings } from '../settings.js';

/** Diagnostics `limits` member (spec 2.15, 8): global limits with durations as strings. */
export interface LimitsSnapshot {
  max_sandboxes: number;
  max_sandboxes_per_owner: number;
  default_exec_timeout: string;
  max_exec_timeout: string;
  max_ttl: string;
  spawn_overflow: 'reject' | 'queue';
  spawn_queue_timeout: string;
  max_spawn_queue: number;
}

/** Diagnostics / metrics `scheduler` member (spec 2.15). */
export interface SchedulerStats {
  spawn_overflow: 'reject' | 'queue';
  spawn_queue_depth: number;
  max_spawn_queue: number;
  spawn_queue_timeout: string;
  admission_control: boolean;
  spawn_queued_total: number;
  spawn_dequeued_total: number;
  spawn_queue_timeouts: number;
  spawn_queue_wait_count: number;
  spawn_queue_wait_total: string;
  spawn_queue_wait_max: string;
  spawn_queue_wait_avg: string;
  spawn_queue_wait_total_ms: number;
  spawn_queue_wait_max_ms: number;
  spawn_queue_wait_avg_ms: number;
  worker_id: string;
  selected_worker_id: string;
  eligible_workers: number;
  placements: number;
  placement_p50_ms: number;
  placement_p99_ms: number;
}

/**
 * Spawn-queue counters. A wait is counted when it ends by admission or by timeout; a client that
 * disconnects while queued is not a wait the scheduler finished, so it is left out.
 */
export class QueueCounters {
  queued = 0;
  dequeued = 0;
  timeouts = 0;
  waitCount = 0;
  waitTotalMs = 0;
  waitMaxMs = 0;

  recordWait(ms: number): void {
    const w = Math.max(0, Math.round(ms));
    this.waitCount++;
    this.waitTotalMs += w;
    if (w > this.waitMaxMs) this.waitMaxMs = w;
  }
}

/** Global limits as diagnostics shows them. */
export function limitsSnapshot(settings: CoreSettings): LimitsSnapshot {
  const d = settings.defaults;
  return {
    max_sandboxes: d.max_sandboxes,
    max_sandboxes_per_owner: d.max_sandboxes_per_owner,
    default_exec_timeout: formatDuration(d.default_exec_timeout_ms),
    max_exec_timeout: formatDuration(d.max_exec_timeout_ms),
    max_ttl: formatDuration(d.max_ttl_ms),
    spawn_overflow: d.spawn_overflow,
    spawn_queue_timeout: formatDuration(d.spawn_queue_timeout_ms),
    max_spawn_queue: d.max_spawn_queue,
  };
}

/** What the scheduler last did and what admission enforces, for the `scheduler` member. */
export interface PlacementFigures {
  /** The worker the last spawn was placed on ('' before any spawn, or when none was eligible). */
  selected_worker_id: string;
  /** How many workers were eligible at the last placement. */
  eligible_workers: number;
  /** Owner quotas saved (each one can deny a spawn). */
  owner_quotas: number;
  /** Placement decisions made, and how long the last 1,024 took (reading workers and counts, choosing). */
  placements: number;
  placement_p50_ms: number;
  placement_p99_ms: number;
}

/**
 * The `scheduler` member from the counters, the current queue depth and the last placement.
 * `admission_control` is true when a spawn can be denied for capacity: a global or per-owner
 * count limit, or an owner quota (the TTL maximum alone is a validation, not admission control).
 */
export function schedulerStats(settings: CoreSettings, c: QueueCounters, depth: number, placement: PlacementFigures): SchedulerStats {
  const d = settings.defaults;
  const avg = c.waitCount > 0 ? Math.round(c.waitTotalMs / c.waitCount) : 0;
  return {
    spawn_overflow: d.spawn_overflow,
    spawn_queue_depth: depth,
    max_spawn_queue: d.max_spawn_queue,
    spawn_queue_timeout: formatDuration(d.spawn_queue_timeout_ms),
    admission_control: d.max_sandboxes > 0 || d.max_sandboxes_per_owner > 0 || placement.owner_quotas > 0,
    spawn_queued_total: c.queued,
    spawn_dequeued_total: c.dequeued,
    spawn_queue_timeouts: c.timeouts,
    spawn_queue_wait_count: c.waitCount,
    spawn_queue_wait_total: formatDuration(c.waitTotalMs),
    spawn_queue_wait_max: formatDuration(c.waitMaxMs),
    spawn_queue_wait_avg: formatDuration(avg),
    spawn_queue_wait_total_ms: c.waitTotalMs,
    spawn_queue_wait_max_ms: c.waitMaxMs,
    spawn_queue_wait_avg_ms: avg,
    worker_id: settings.worker_id,
    selected_worker_id: placement.selected_worker_id,
    eligible_workers: placement.eligible_workers,
    placements: placement.placements,
    placement_p50_ms: placement.placement_p50_ms,
    placement_p99_ms: placement.placement_p99_ms,
  };
}
