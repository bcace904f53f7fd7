/**
 * SQL both adapters run verbatim (written with `?` placeholders; the PostgreSQL adapter numbers
 * them). One text for both keeps filters and sort orders identical across drivers. Sorting relies
 * on byte order of ids and ISO timestamps: SQLite's default, `COLLATE "C"` columns in PostgreSQL.
 */
import { badRequest } from '../../../core/errors.js';
import type { AuditFilter, SandboxFilter } from '../../../core/ports/index.js';
import {
  AUDIT_COLUMNS,
  LEASE_COLUMNS,
  QUOTA_COLUMNS,
  SANDBOX_COLUMNS,
  SNAPSHOT_COLUMNS,
  TEMPLATE_COLUMNS,
  VOLUME_COLUMNS,
  WORKER_COLUMNS,
} from './records.js';

export const AUDIT_DEFAULT_LIMIT = 100;
export const AUDIT_MAX_LIMIT = 10_000;

export interface SqlQuery {
  sql: string;
  params: unknown[];
}

const KNOWN_STATES = new Set(['running', 'paused', 'destroyed', 'unhealthy', 'expired', 'error']);
const marks = (n: number) => Array.from({ length: n }, () => '?').join(', ');
const list = (cols: readonly string[]) => cols.join(', ');

export const SQL = {
  getMeta: 'SELECT value FROM meta WHERE key = ?',
  setMeta: 'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value',
  claimMeta: 'INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING',

  claimIdempotency: `INSERT INTO idempotency_keys (owner_key, key, request_hash, sandbox_id, created_at) VALUES (?, ?, ?, NULL, ?)
    ON CONFLICT (owner_key, key) DO NOTHING`,
  getIdempotency: 'SELECT owner_key, key, request_hash, sandbox_id, created_at FROM idempotency_keys WHERE owner_key = ? AND key = ?',
  completeIdempotency: 'UPDATE idempotency_keys SET sandbox_id = ? WHERE owner_key = ? AND key = ? AND created_at = ?',
  dropIdempotency: 'DELETE FROM idempotency_keys WHERE owner_key = ? AND key = ? AND created_at = ? AND sandbox_id IS NULL',
  dropIdempotencyAt: 'DELETE FROM idempotency_keys WHERE owner_key = ? AND key = ? AND created_at = ?',
  pruneIdempotency: 'DELETE FROM idempotency_keys WHERE created_at < ?',

  insertSandbox: `INSERT INTO sandboxes (${list(SANDBOX_COLUMNS)}) VALUES (${marks(SANDBOX_COLUMNS.length)})
    ON CONFLICT (id) DO NOTHING`,
  getSandbox: `SELECT ${list(SANDBOX_COLUMNS)} FROM sandboxes WHERE id = ?`,

  insertTemplate: `INSERT INTO templates (${list(TEMPLATE_COLUMNS)}) VALUES (${marks(TEMPLATE_COLUMNS.length)})
    ON CONFLICT (name) DO NOTHING`,
  getTemplate: `SELECT ${list(TEMPLATE_COLUMNS)} FROM templates WHERE name = ?`,
  listTemplates: `SELECT ${list(TEMPLATE_COLUMNS)} FROM templates ORDER BY name`,
  updateTemplate: `UPDATE templates SET image = ?, memory_mb = ?, vcpus = ?, ttl = ?, provider = ?, metadata = ?, network = ?,
    snapshot = ?, volumes = ?, warm = ?, egress = ?, secrets = ?, auto_pause = ?, on_expire = ?, updated_at = ?
    WHERE name = ? RETURNING ${list(TEMPLATE_COLUMNS)}`,
  deleteTemplate: 'DELETE FROM templates WHERE name = ?',

  insertSnapshot: `INSERT INTO snapshots (${list(SNAPSHOT_COLUMNS)}) VALUES (${marks(SNAPSHOT_COLUMNS.length)})
    ON CONFLICT (name) DO NOTHING`,
  getSnapshot: `SELECT ${list(SNAPSHOT_COLUMNS)} FROM snapshots WHERE name = ?`,
  listSnapshots: `SELECT ${list(SNAPSHOT_COLUMNS)} FROM snapshots ORDER BY name`,
  deleteSnapshot: 'DELETE FROM snapshots WHERE name = ?',

  insertVolume: `INSERT INTO volumes (${list(VOLUME_COLUMNS)}) VALUES (${marks(VOLUME_COLUMNS.length)})
    ON CONFLICT (name) DO NOTHING`,
  getVolume: `SELECT ${list(VOLUME_COLUMNS)} FROM volumes WHERE name = ?`,
  listVolumes: `SELECT ${list(VOLUME_COLUMNS)} FROM volumes ORDER BY name`,
  deleteVolume: 'DELETE FROM volumes WHERE name = ?',
  // Narrowed by LIKE on the stored JSON (see volumesText); the caller confirms by parsing.
  sandboxesOfFork: `SELECT ${list(SANDBOX_COLUMNS)} FROM sandboxes WHERE fork = ? ORDER BY created_at, id LIMIT 100`,
  sandboxesMounting: `SELECT id, volumes FROM sandboxes WHERE state <> 'destroyed' AND volumes IS NOT NULL
    AND volumes LIKE ? ESCAPE '!' ORDER BY id`,

  upsertQuota: `INSERT INTO owner_quotas (${list(QUOTA_COLUMNS)}) VALUES (${marks(QUOTA_COLUMNS.length)})
    ON CONFLICT (owner_id) DO UPDATE SET max_sandboxes = excluded.max_sandboxes, max_ttl_ms = excluded.max_ttl_ms,
    max_exec_timeout_ms = excluded.max_exec_timeout_ms, updated_at = excluded.updated_at
    RETURNING ${list(QUOTA_COLUMNS)}`,
  getQuota: `SELECT ${list(QUOTA_COLUMNS)} FROM owner_quotas WHERE owner_id = ?`,
  listQuotas: `SELECT ${list(QUOTA_COLUMNS)} FROM owner_quotas ORDER BY owner_id`,
  deleteQuota: 'DELETE FROM owner_quotas WHERE owner_id = ?',

  upsertWorker: `INSERT INTO workers (${list(WORKER_COLUMNS)}) VALUES (${marks(WORKER_COLUMNS.length)})
    ON CONFLICT (id) DO UPDATE SET hostname = excluded.hostname, status = excluded.status,
    providers = excluded.providers, capabilities = excluded.capabilities, capacity = excluded.capacity,
    last_heartbeat = excluded.last_heartbeat, updated_at = excluded.updated_at
    RETURNING ${list(WORKER_COLUMNS)}`,
  getWorker: `SELECT ${list(WORKER_COLUMNS)} FROM workers WHERE id = ?`,
  listWorkers: `SELECT ${list(WORKER_COLUMNS)} FROM workers ORDER BY id`,
  deleteWorker: 'DELETE FROM workers WHERE id = ?',

  getLease: `SELECT ${list(LEASE_COLUMNS)} FROM leases WHERE resource_id = ?`,
  listLeases: `SELECT ${list(LEASE_COLUMNS)} FROM leases ORDER BY resource_id`,
  renewLease: `UPDATE leases SET generation = generation + 1, expires_at = ? WHERE resource_id = ? AND holder_id = ?
    RETURNING ${list(LEASE_COLUMNS)}`,
  releaseLease: 'DELETE FROM leases WHERE resource_id = ? AND holder_id = ?',

  insertAudit: `INSERT INTO admin_audit (${list(AUDIT_COLUMNS)}) VALUES (${marks(AUDIT_COLUMNS.length)})`,
  pruneAudit: 'DELETE FROM admin_audit WHERE created_at < ?',
} as const;

/**
 * Live = counted against limits (spec 2.7): running, paused (DESIGN.md §16) or unhealthy, expiry
 * ahead. Past = live state, expiry passed.
 */
const PAST = "state IN ('running', 'paused', 'unhealthy') AND expires_at <= ?";
const PAST_S = "s.state IN ('running', 'paused', 'unhealthy') AND s.expires_at <= ?";

/**
 * Live sandboxes in total and the earliest expiry among them (DESIGN.md §13): the counter row
 * (kept by triggers) minus the rows still in a live state but past their TTL, which the reaper
 * keeps few; the earliest expiry is one index seek per live state. Params: now, now, now, now.
 */
export const COUNT_LIVE = `SELECT
  (SELECT COALESCE(SUM(n), 0) FROM live_counts WHERE kind = 0) - (SELECT COUNT(*) FROM sandboxes WHERE ${PAST}) AS n,
  (SELECT MIN(e) FROM (
    SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'running' AND expires_at > ?
    UNION ALL SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'paused' AND expires_at > ?
    UNION ALL SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'unhealthy' AND expires_at > ?) AS t) AS next_expiry`;
export const countLiveParams = (now: string) => [now, now, now, now];

/** Live sandboxes of each of the given owners (counter rows minus their rows past TTL). */
export function countLiveByOwnerQuery(now: string, owners: readonly string[]): SqlQuery {
  return {
    sql: `SELECT c.owner_id, c.n - (SELECT COUNT(*) FROM sandboxes s WHERE s.owner_id = c.owner_id AND ${PAST_S}) AS n
      FROM live_counts c WHERE c.kind = 1 AND c.owner_id IN (${marks(owners.length)})`,
    params: [now, ...owners],
  };
}

/** Rows counted per state, provider, worker and TTL side (metrics): the database aggregates, nothing is read row by row. */
export const TALLY_SANDBOXES = `SELECT state, provider, worker_id, past_ttl, COUNT(*) AS n FROM
  (SELECT state, provider, worker_id, CASE WHEN expires_at <= ? THEN 1 ELSE 0 END AS past_ttl FROM sandboxes) AS t
  GROUP BY state, provider, worker_id, past_ttl`;

/** Live sandboxes per worker (placement, DESIGN.md §13): counter rows minus rows past TTL. Params: now. */
export const COUNT_LIVE_BY_WORKER = `SELECT c.worker_id, c.n - COALESCE(p.n, 0) AS n FROM live_counts c
  LEFT JOIN (SELECT worker_id, COUNT(*) AS n FROM sandboxes WHERE ${PAST} GROUP BY worker_id) p ON p.worker_id = c.worker_id
  WHERE c.kind = 2`;
/** The same for one owner. Params: now, owner, owner. */
export const COUNT_LIVE_BY_WORKER_FOR_OWNER = `SELECT c.worker_id, c.n - COALESCE(p.n, 0) AS n FROM live_counts c
  LEFT JOIN (SELECT worker_id, COUNT(*) AS n FROM sandboxes WHERE ${PAST} AND owner_id = ? GROUP BY worker_id) p
    ON p.worker_id = c.worker_id
  WHERE c.kind = 3 AND c.owner_id = ?`;

/**
 * Sandboxes of one provider a list shows (running, unhealthy or error, expiry after `now`): one
 * range of `sandboxes_provider_live_idx` per state, never a row read (DESIGN.md §13). Params:
 * provider, now. The states are literals so a planner matches them to the index.
 */
export const COUNT_OF_PROVIDER = `SELECT COUNT(*) AS n FROM sandboxes
  WHERE provider = ? AND state IN ('running', 'paused', 'unhealthy', 'error') AND expires_at > ?`;

/** UPDATE for a sandbox patch given as [column, value] pairs (columns come from SANDBOX_COLUMNS only). */
export function updateSandboxQuery(id: string, pairs: Array<[string, unknown]>): SqlQuery {
  return {
    sql: `UPDATE sandboxes SET ${pairs.map(([c]) => `${c} = ?`).join(', ')} WHERE id = ?
      RETURNING ${list(SANDBOX_COLUMNS)}`,
    params: [...pairs.map(([, v]) => v), id],
  };
}

/** Sandboxes matching every given filter member, by created_at then id. Empty `states` = any state. */
export function listSandboxesQuery(filter: SandboxFilter = {}): SqlQuery {
  const where: string[] = [];
  const params: unknown[] = [];
  if (filter.states && filter.states.length > 0) {
    // Literals, not parameters: a planner can match them to the partial index of listed states
    // (sandboxes_listed_idx) only when it sees the values. Each is one of the known states.
    for (const s of filter.states) if (!KNOWN_STATES.has(s)) throw badRequest(`unknown sandbox state ${JSON.stringify(s)}`);
    where.push(`state IN (${filter.states.map((s) => `'${s}'`).join(', ')})`);
  }
  if (filter.owner_id !== undefined) {
    where.push('owner_id = ?');
    params.push(filter.owner_id);
  }
  if (filter.worker_id !== undefined) {
    where.push('worker_id = ?');
    params.push(filter.worker_id);
  }
  if (filter.id_prefix !== undefined && filter.id_prefix !== '') {
    // substr instead of LIKE: `%` and `_` in the prefix match themselves (lengths in code points).
    where.push('substr(id, 1, ?) = ?');
    params.push([...filter.id_prefix].length, filter.id_prefix);
  }
  if (filter.expires_after !== undefined) {
    where.push('expires_at > ?');
    params.push(filter.expires_after);
  }
  if (filter.pause_due_by !== undefined) {
    where.push('pause_at IS NOT NULL AND pause_at <= ?');
    params.push(filter.pause_due_by);
  }
  if (filter.expires_by !== undefined) {
    where.push('expires_at <= ?');
    params.push(filter.expires_by);
  }
  if (filter.visible_to !== undefined) {
    // isPrivateOwner (core/admission/owner.ts) in SQL: unowned and derived owners are visible to all.
    const open = "owner_id IS NULL OR owner_id = '' OR substr(owner_id, 1, 4) = 'key/' OR substr(owner_id, 1, 3) = 'ip/'";
    if (filter.visible_to.owner_id === null) where.push(`(${open})`);
    else {
      where.push(`(${open} OR owner_id = ?)`);
      params.push(filter.visible_to.owner_id);
    }
  }
  if (filter.after !== undefined) {
    // A row value: both planners seek the (created_at, id) index to the position instead of
    // scanning from the start as an OR of two comparisons would make them.
    where.push('(created_at, id) > (?, ?)');
    params.push(filter.after.created_at, filter.after.id);
  }
  const clause = where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '';
  let limit = '';
  if (filter.limit !== undefined) {
    limit = ' LIMIT ?';
    params.push(Math.max(0, Math.floor(filter.limit)));
  }
  return { sql: `SELECT ${list(SANDBOX_COLUMNS)} FROM sandboxes${clause} ORDER BY created_at, id${limit}`, params };
}

/** Clamps an audit limit: absent or below 1 → 100, above 10000 → 10000. */
export function auditLimit(limit: number | undefined): number {
  if (limit === undefined || !Number.isFinite(limit) || limit < 1) return AUDIT_DEFAULT_LIMIT;
  return Math.min(Math.floor(limit), AUDIT_MAX_LIMIT);
}

/** Parses a filter bound and returns it in the stored ISO form, so text comparison is time comparison. */
export function isoBound(value: string, field: string): string {
  const t = Date.parse(value);
  if (!Number.isFinite(t)) throw badRequest(`invalid ${field} timestamp: ${JSON.stringify(value)}`);
  return new Date(t).toISOString();
}

/**
 * Audit records matching every filter member, newest first. `actor` and `path` match by prefix (so
 * `api-key` finds `api-key:dave`), `method` case-insensitively, `since` and `until` are inclusive
 * bounds on created_at.
 */
export function listAuditQuery(filter: AuditFilter = {}): SqlQuery {
  const where: string[] = [];
  const params: unknown[] = [];
  // substr instead of LIKE: no escaping of `%`/`_`, same meaning on both drivers (lengths in code points).
  const prefix = (column: 'actor' | 'path', value: string | undefined) => {
    if (value === undefined || value === '') return;
    where.push(`substr(${column}, 1, ?) = ?`);
    params.push([...value].length, value);
  };
  prefix('actor', filter.actor);
  if (filter.method !== undefined) {
    where.push('upper(method) = upper(?)');
    params.push(filter.method);
  }
  if (filter.status !== undefined) {
    where.push('status = ?');
    params.push(filter.status);
  }
  prefix('path', filter.path);
  if (filter.since !== undefined) {
    where.push('created_at >= ?');
    params.push(isoBound(filter.since, 'since'));
  }
  if (filter.until !== undefined) {
    where.push('created_at <= ?');
    params.push(isoBound(filter.until, 'until'));
  }
  const clause = where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '';
  params.push(auditLimit(filter.limit));
  return {
    sql: `SELECT ${list(AUDIT_COLUMNS)} FROM admin_audit${clause} ORDER BY created_at DESC, id DESC LIMIT ?`,
    params,
  };
}
