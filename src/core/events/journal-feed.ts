/**
 * Events across replicas (DESIGN.md §7 "Replicas"): every event this replica publishes is appended
 * to the shared journal (in publish order, batched), and every replica reads the journal in id
 * order into its bus, so each `/api/v1/events` subscriber sees every replica's events with ids
 * that mean the same everywhere. A NOTIFY wakes the readers; a poll and a catch-up after every
 * reconnect make sure nothing is missed. While the database is away, events wait in a bounded
 * outbox and are appended when it returns.
 */
import type { EventJournalPort, JournalEntry } from '../ports/index.js';
import type { EventBus } from './bus.js';
import type { EventInput } from './kinds.js';

const BATCH = 500;
const PAGE = 1000;
/** Events kept while the journal cannot be written; beyond it the oldest go (and are counted). */
const MAX_OUTBOX = 10_000;
const POLL_MS = 2_000;
const RETRY_MS = [100, 250, 500, 1000, 2000, 5000];
/** How long `stop` waits for the outbox to drain. */
const STOP_FLUSH_MS = 3_000;

interface Pending {
  timestamp: string;
  input: EventInput;
}

export interface JournalFeedStats {
  cursor: number;
  outbox: number;
  dropped: number;
}

export class JournalFeed {
  private outbox: Pending[] = [];
  private dropped = 0;
  private cursor = 0;
  private flushing: Promise<void> | null = null;
  private pulling: Promise<void> | null = null;
  private pullAgain = false;
  private poll: NodeJS.Timeout | undefined;
  private listener: { stop(): Promise<void> } | undefined;
  private stopped = false;

  constructor(
    private readonly journal: EventJournalPort,
    private readonly bus: EventBus,
    private readonly replicaId: string,
    private readonly warn: (fields: Record<string, unknown>, msg: string) => void,
  ) {}

  /** Loads recent history, then routes the bus's publishes through the journal. */
  async start(): Promise<void> {
    this.cursor = Math.max(0, (await this.journal.latestId()) - this.bus.historySize);
    await this.pullNow();
    this.bus.setSink((timestamp, input) => this.enqueue({ timestamp, input }));
    this.listener = this.journal.listen(
      // An announcement of what this replica already delivered (its own appends) needs no read.
      (newest) => {
        if (newest === null || newest > this.cursor) this.pullSoon();
      },
      () => this.pullSoon(),
    );
    this.poll = setInterval(() => this.pullSoon(), POLL_MS);
    this.poll.unref();
  }

  stats(): JournalFeedStats {
    return { cursor: this.cursor, outbox: this.outbox.length, dropped: this.dropped };
  }

  /** Appends what is still queued (bounded wait), then stops reading. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    if (this.poll) clearInterval(this.poll);
    const deadline = performance.now() + STOP_FLUSH_MS;
    while (this.outbox.length > 0 && performance.now() < deadline) {
      this.flushSoon();
      await Promise.race([this.flushing, new Promise((r) => setTimeout(r, 100))]);
    }
    this.stopped = true;
    this.bus.setSink(null);
    await this.listener?.stop();
  }

  private enqueue(p: Pending): void {
    if (this.outbox.length >= MAX_OUTBOX) {
      this.outbox.shift();
      this.dropped++;
    }
    this.outbox.push(p);
    this.flushSoon();
  }

  private flushSoon(): void {
    if (this.flushing || this.stopped) return;
    this.flushing = this.flushLoop().finally(() => {
      this.flushing = null;
      if (this.outbox.length > 0 && !this.stopped) this.flushSoon();
    });
  }

  private async flushLoop(): Promise<void> {
    let failures = 0;
    while (this.outbox.length > 0 && !this.stopped) {
      const batch = this.outbox.slice(0, BATCH);
      let appended: JournalEntry[];
      try {
        appended = await this.journal.append(this.replicaId, batch);
      } catch (err) {
        if (failures === 0)
          this.warn({ err: String(err), queued: this.outbox.length }, 'event journal unavailable; events wait in the outbox');
        await new Promise((r) => setTimeout(r, RETRY_MS[Math.min(failures++, RETRY_MS.length - 1)]));
        continue;
      }
      failures = 0;
      // The outbox may have lost its oldest entries meanwhile (overflow): drop what was appended.
      const sent = new Set(batch);
      this.outbox = this.outbox.filter((p) => !sent.has(p));
      await this.afterAppend(appended);
    }
  }

  /**
   * Its own entries right after the cursor (no other replica appended in between: ids commit in
   * order) are delivered as they are, without reading them back; otherwise the journal is read.
   */
  private async afterAppend(entries: JournalEntry[]): Promise<void> {
    while (this.pulling !== null) await this.pulling;
    // Already read (a pull ran meanwhile): nothing to do.
    if (entries.length > 0 && entries[entries.length - 1]!.event.id <= this.cursor) return;
    const contiguous = entries.length > 0 && entries.every((e, i) => e.event.id === this.cursor + 1 + i);
    if (!contiguous || this.stopped) return this.pullNow();
    for (const entry of entries) {
      this.bus.deliver(entry.event);
      this.cursor = entry.event.id;
    }
  }

  private pullSoon(): void {
    void this.pullNow();
  }

  /** Reads the journal after the cursor into the bus; coalesced, never concurrent. */
  private pullNow(): Promise<void> {
    if (this.pulling !== null) {
      this.pullAgain = true;
      return this.pulling;
    }
    this.pulling = (async () => {
      do {
        this.pullAgain = false;
        try {
          for (;;) {
            const page = await this.journal.after(this.cursor, PAGE);
            for (const entry of page) {
              this.bus.deliver(entry.event);
              this.cursor = entry.event.id;
            }
            if (page.length < PAGE) break;
          }
        } catch {
          // Database away: the poll or the reconnect reads again.
          break;
        }
      } while (this.pullAgain && !this.stopped);
    })().finally(() => (this.pulling = null));
    return this.pulling;
  }
}
