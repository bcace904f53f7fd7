/**
 * Activity of sandboxes, in memory on the node that serves it (DESIGN.md §16): what is in flight
 * (execs, streams, WebSockets, previews) and when the last activity ended. An explicit pause is
 * refused while something is in flight; a sandbox with `auto_pause` is paused once nothing has
 * been in flight for that long. GETs and lists are not activity. Time comes from the Clock port,
 * so a fake clock drives it in tests.
 */
import type { Clock } from '../ports/index.js';

interface Entry {
  inflight: number;
  /** Epoch ms of the last activity (a start, an end, a touch). */
  last: number;
  /** Auto-pause after this many idle ms; null: not watched. */
  autoPauseMs: number | null;
}

export class ActivityTracker {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly clock: Clock) {}

  private now(): number {
    return this.clock.now().getTime();
  }

  /** Something starts in the sandbox; the answer ends it (once, however often it is called). */
  begin(id: string): () => void {
    const e = this.entries.get(id) ?? { inflight: 0, last: this.now(), autoPauseMs: null };
    e.inflight++;
    e.last = this.now();
    this.entries.set(id, e);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      e.inflight--;
      e.last = this.now();
      if (e.inflight === 0 && e.autoPauseMs === null && this.entries.get(id) === e) this.entries.delete(id);
    };
  }

  /** A short operation (a file call, a process call) happened now. */
  touch(id: string): void {
    const e = this.entries.get(id);
    if (e) e.last = this.now();
  }

  /** Operations in flight in the sandbox now. */
  inFlight(id: string): number {
    return this.entries.get(id)?.inflight ?? 0;
  }

  /** Watches the sandbox for auto-pause; its idle time counts from now. */
  watch(id: string, autoPauseMs: number): void {
    const e = this.entries.get(id) ?? { inflight: 0, last: this.now(), autoPauseMs };
    e.autoPauseMs = autoPauseMs;
    e.last = this.now();
    this.entries.set(id, e);
  }

  /** No more auto-pause for it (paused, destroyed); what is in flight is still counted. */
  unwatch(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    e.autoPauseMs = null;
    if (e.inflight === 0) this.entries.delete(id);
  }

  /** Watched sandboxes with nothing in flight for at least their auto-pause window. */
  idle(): string[] {
    const now = this.now();
    const out: string[] = [];
    for (const [id, e] of this.entries) {
      if (e.autoPauseMs !== null && e.inflight === 0 && now - e.last >= e.autoPauseMs) out.push(id);
    }
    return out;
  }

  /** How many sandboxes are watched for auto-pause (diagnostics). */
  watched(): number {
    let n = 0;
    for (const e of this.entries.values()) if (e.autoPauseMs !== null) n++;
    return n;
  }
}
