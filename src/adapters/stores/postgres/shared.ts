/**
 * The shared-state ports over PostgreSQL (DESIGN.md §7 "Replicas"): admission slots counted under
 * one advisory lock by every replica, and the event journal whose ids commit in order and whose
 * appends are announced with NOTIFY (the notification carries only the newest id).
 */
import pg from 'pg';
import type { PoolClient } from 'pg';
import { shapeEvent } from '../../../core/events/bus.js';
import type { EventInput } from '../../../core/events/kinds.js';
import type { LiveCounts, SandboxRecord } from '../../../core/ports/index.js';
import { SQL } from '../shared/queries.js';
import { sandboxValues } from '../shared/records.js';
import type { EventJournalPort, JournalEntry, SharedState, SlotLedgerPort, SlotRequest } from '../../../core/ports/index.js';

/** Runs `fn` in a transaction on one pooled connection (the driver's, so errors are redacted). */
export type Transact = <T>(
  fn: (q: (sql: string, params?: unknown[]) => Promise<pg.QueryResult>) => Promise<T>,
  lead?: string,
) => Promise<T>;
export type Query = (sql: string, params?: unknown[]) => Promise<pg.QueryResult>;

export const CHANNEL = 'sbx_events';
const LIVE_STATES = "('running', 'paused', 'unhealthy')";
// A slot counts until its backstop expiry, and only while its replica's lease is live: a replica
// that died mid-spawn stops holding capacity within one lease TTL.
const SLOT_LIVE =
  `s.expires_at > $1 AND EXISTS (SELECT 1 FROM leases l WHERE l.resource_id = 'replica:' || ` + `s.holder_id AND l.expires_at > $1)`;

// Live sandboxes from the trigger-kept counters minus the rows past their TTL (as SqlStore.countLive),
// plus the slots of spawns still being created; in one round trip.
const COUNTS = `
  SELECT 'total' AS k, NULL AS owner_id,
    (SELECT COALESCE(SUM(n), 0) FROM live_counts WHERE kind = 0)
      - (SELECT COUNT(*) FROM sandboxes WHERE state IN ${LIVE_STATES} AND expires_at <= $1) AS n,
    (SELECT MIN(e) FROM (SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'running' AND expires_at > $1
      UNION ALL SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'paused' AND expires_at > $1
      UNION ALL SELECT MIN(expires_at) AS e FROM sandboxes WHERE state = 'unhealthy' AND expires_at > $1) AS t) AS next_expiry
  UNION ALL SELECT 'slots', NULL, COUNT(*), NULL FROM admission_slots s WHERE ${SLOT_LIVE}
  UNION ALL SELECT 'owner', c.owner_id,
    c.n - (SELECT COUNT(*) FROM sandboxes x WHERE x.owner_id = c.owner_id AND x.state IN ${LIVE_STATES} AND x.expires_at <= $1), NULL
    FROM live_counts c WHERE c.kind = 1 AND c.owner_id = ANY($2::text[])
  UNION ALL SELECT 'owner', s.owner_id, COUNT(*), NULL FROM admission_slots s
    WHERE s.owner_id = ANY($2::text[]) AND ${SLOT_LIVE} GROUP BY s.owner_id`;

/** A sandbox row stored and its admission slot dropped, in one statement. */
const INSERT_WITH_SLOT = (() => {
  let n = 0;
  const insert = SQL.insertSandbox.replace(/\?/g, () => `$${++n}`);
  return `WITH slot AS (DELETE FROM admission_slots WHERE id = $${n + 1}) ${insert}`;
})();

/** The slot stored and the counts before it, in one round trip (under the admission lock). */
const RESERVE = `WITH slot AS (INSERT INTO admission_slots (id, owner_id, holder_id, expires_at) VALUES ($3, $4, $5, $6) RETURNING id)
  ${COUNTS} UNION ALL SELECT 'reserved', NULL, 0, NULL FROM slot`;

function countsFrom(rows: Array<Record<string, unknown>>): LiveCounts {
  const out: LiveCounts = { total: 0, next_expiry: null, by_owner: {} };
  for (const r of rows) {
    const n = Number(r.n);
    if (r.k === 'owner') {
      if (n > 0) out.by_owner[String(r.owner_id)] = (out.by_owner[String(r.owner_id)] ?? 0) + n;
    } else out.total += n;
    if (r.k === 'total' && r.next_expiry != null) out.next_expiry = String(r.next_expiry);
  }
  return out;
}

const ADMISSION_LOCK = "SELECT pg_advisory_xact_lock(hashtext('sbx.admission:' || current_schema()))";
const EVENTS_LOCK = "SELECT pg_advisory_xact_lock(hashtext('sbx.events:' || current_schema()))";
// The ids, and the announcement of the newest (sent at commit) in the same statement.
const APPEND = `WITH ins AS (
      INSERT INTO events (replica_id, body) SELECT $1, b FROM unnest($2::text[]) WITH ORDINALITY AS t(b, n) ORDER BY n
    RETURNING id, replica_id, body)
  SELECT id, replica_id, body, (SELECT pg_notify($3, MAX(id)::text) FROM ins) AS announced FROM ins`;

/** A journal row as every reader sees it (the appender too). */
function entryOf(r: Record<string, unknown>): JournalEntry {
  const body = JSON.parse(String(r.body)) as { timestamp: string } & EventInput;
  const { timestamp, ...input } = body;
  return { event: shapeEvent(Number(r.id), timestamp, input), replica_id: String(r.replica_id) };
}

class PgSlots implements SlotLedgerPort {
  constructor(
    private readonly query: Query,
    private readonly transact: Transact,
  ) {}

  async count(now: string, owners: readonly string[]): Promise<LiveCounts> {
    return countsFrom((await this.query(COUNTS, [now, [...new Set(owners)]])).rows);
  }

  reserve(
    now: string,
    owners: readonly string[],
    slot: SlotRequest,
    decide: (c: LiveCounts) => boolean,
  ): Promise<{ counts: LiveCounts; reserved: boolean }> {
    // The lock travels with BEGIN and is held to commit: no other replica counts between this count
    // and this decision. One statement stores the slot and counts: its snapshot is taken after the
    // lock and does not see its own insert, so the counts are those before this slot; a refusal
    // deletes the slot again before the lock is let go.
    return this.transact(async (q) => {
      const params = [now, [...new Set(owners)], slot.id, slot.owner_id, slot.holder_id, slot.expires_at];
      const counts = countsFrom((await q(RESERVE, params)).rows);
      if (decide(counts)) return { counts, reserved: true };
      await q('DELETE FROM admission_slots WHERE id = $1', [slot.id]);
      return { counts, reserved: false };
    }, ADMISSION_LOCK);
  }

  async drop(id: string): Promise<void> {
    await this.query('DELETE FROM admission_slots WHERE id = $1', [id]);
  }

  async insertSandbox(slotId: string, rec: SandboxRecord): Promise<boolean> {
    const values = sandboxValues(rec);
    const res = await this.query(INSERT_WITH_SLOT, [...values, slotId]);
    return (res.rowCount ?? 0) > 0;
  }

  async dropHeldBy(holderId: string): Promise<number> {
    return (await this.query('DELETE FROM admission_slots WHERE holder_id = $1', [holderId])).rowCount ?? 0;
  }
}

/** Reconnect backoff of the listening connection. */
const BACKOFF_MS = [250, 500, 1000, 2000, 5000];

class PgJournal implements EventJournalPort {
  constructor(
    private readonly query: Query,
    private readonly transact: Transact,
    private readonly newClient: () => pg.Client,
  ) {}

  append(replicaId: string, events: ReadonlyArray<{ timestamp: string; input: EventInput }>): Promise<JournalEntry[]> {
    if (events.length === 0) return Promise.resolve([]);
    // The id is the row's; the body is the rest of the event, in its documented key order.
    const bodies = events.map((e) => {
      const { id: _id, ...rest } = shapeEvent(0, e.timestamp, e.input);
      return JSON.stringify(rest);
    });
    // Ids are drawn under the lock (sent with BEGIN), held to commit: ids become visible in increasing order.
    return this.transact(async (q) => {
      const res = await q(APPEND, [replicaId, bodies, CHANNEL]);
      return res.rows.map((r) => entryOf(r)).sort((a, b) => a.event.id - b.event.id);
    }, EVENTS_LOCK);
  }

  async after(afterId: number, limit: number): Promise<JournalEntry[]> {
    const res = await this.query('SELECT id, replica_id, body FROM events WHERE id > $1 ORDER BY id LIMIT $2', [afterId, limit]);
    return res.rows.map((r) => entryOf(r));
  }

  async latestId(): Promise<number> {
    const res = await this.query('SELECT COALESCE(MAX(id), 0) AS id FROM events');
    return Number(res.rows[0]?.id ?? 0);
  }

  async prune(keep: number): Promise<number> {
    const res = await this.query('DELETE FROM events WHERE id <= (SELECT COALESCE(MAX(id), 0) FROM events) - $1', [keep]);
    return res.rowCount ?? 0;
  }

  listen(onAnnounce: (newestId: number | null) => void, onReconnect: () => void): { stop(): Promise<void> } {
    let stopped = false;
    let client: pg.Client | null = null;
    let attempt = 0;
    let timer: NodeJS.Timeout | undefined;
    let connectedOnce = false;
    const retry = () => {
      if (stopped) return;
      const delay = BACKOFF_MS[Math.min(attempt++, BACKOFF_MS.length - 1)]!;
      timer = setTimeout(connect, delay);
      timer.unref();
    };
    const connect = () => {
      if (stopped) return;
      const c = this.newClient();
      client = c;
      let lost = false;
      const onLost = () => {
        if (lost) return;
        lost = true;
        c.removeAllListeners('notification');
        void c.end().catch(() => undefined);
        if (client === c) client = null;
        retry();
      };
      c.on('error', onLost);
      c.on('end', onLost);
      c.on('notification', (n) => {
        const id = Number(n.payload);
        onAnnounce(Number.isSafeInteger(id) ? id : null);
      });
      c.connect()
        .then(() => c.query(`LISTEN ${CHANNEL}`))
        .then(() => {
          if (stopped) return void c.end().catch(() => undefined);
          attempt = 0;
          // Whatever was appended while nobody listened is read now.
          if (connectedOnce) onReconnect();
          connectedOnce = true;
        })
        .catch(onLost);
    };
    connect();
    return {
      stop: async () => {
        stopped = true;
        if (timer) clearTimeout(timer);
        const c = client;
        client = null;
        if (c) {
          c.removeAllListeners();
          c.on('error', () => undefined);
          await c.end().catch(() => undefined);
        }
      },
    };
  }
}

export function pgSharedState(query: Query, transact: Transact, newClient: () => pg.Client): SharedState {
  return { slots: new PgSlots(query, transact), journal: new PgJournal(query, transact, newClient) };
}

export type { PoolClient };
