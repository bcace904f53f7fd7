import type { Clock } from '../ports/index.js';
import type { EventInput, EventKind, SbxEvent } from './kinds.js';

export type EventListener = (event: SbxEvent) => void;

export interface EventFilter {
  /** Kinds or `group.*` wildcards; empty = all. */
  types?: string[];
  sandbox_id?: string;
}

/** Where published events go instead of straight to listeners (a shared journal, DESIGN §7). */
export type EventSink = (timestamp: string, input: EventInput) => void;

/**
 * In-process publish/subscribe with a bounded history. Publishing never blocks: listeners are
 * called synchronously and must only enqueue (the SSE transport keeps its own bounded buffer).
 * With a sink (replicas on one database), a published event is journalled first and reaches the
 * listeners of every replica, this one included, through `deliver` in journal order.
 */
export class EventBus {
  private readonly history: SbxEvent[] = [];
  private readonly listeners = new Set<EventListener>();
  private nextId = 1;
  private total = 0;
  private sink: EventSink | null = null;

  constructor(
    private readonly clock: Clock,
    readonly historySize = 1000,
  ) {}

  publish(input: EventInput): void {
    const timestamp = this.clock.now().toISOString();
    if (this.sink) this.sink(timestamp, input);
    else this.deliver(shapeEvent(this.nextId, timestamp, input));
  }

  /** Routes later publishes to `sink` (null: back to direct delivery). */
  setSink(sink: EventSink | null): void {
    this.sink = sink;
  }

  /** True when ids come from a shared journal (they survive restarts and span replicas). */
  get journalled(): boolean {
    return this.sink !== null;
  }

  /** Hands one event, id already assigned, to history and listeners. Ids must only grow. */
  deliver(event: SbxEvent): void {
    if (event.id < this.nextId) return; // already delivered
    this.nextId = event.id + 1;
    this.total++;
    this.history.push(event);
    if (this.history.length > this.historySize) this.history.shift();
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A faulty subscriber must never break publishers.
      }
    }
  }

  /** The newest id delivered (0 before any). */
  lastId(): number {
    return this.nextId - 1;
  }

  subscribe(listener: EventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Events after `afterId` (exclusive) still in history, oldest first. */
  since(afterId: number, filter?: EventFilter): SbxEvent[] {
    return this.history.filter((e) => e.id > afterId && matches(e, filter));
  }

  recent(filter?: EventFilter): SbxEvent[] {
    return this.history.filter((e) => matches(e, filter));
  }

  stats(): { subscribers: number; history_size: number; events_total: number } {
    return { subscribers: this.listeners.size, history_size: this.history.length, events_total: this.total };
  }
}

/**
 * The event in the documented key order (DESIGN.md §3: id, type, timestamp, sandbox_id?,
 * owner_id?, worker_id?, data?), whatever order the publisher wrote; clients see exactly this JSON.
 * Members left undefined are dropped, so an event never carries a key without a value.
 */
export function shapeEvent(id: number, timestamp: string, input: EventInput): SbxEvent {
  const event: SbxEvent = { id, type: input.type, timestamp };
  if (input.sandbox_id !== undefined) event.sandbox_id = input.sandbox_id;
  if (input.owner_id !== undefined) event.owner_id = input.owner_id;
  if (input.worker_id !== undefined) event.worker_id = input.worker_id;
  if (input.data !== undefined) event.data = input.data;
  return event;
}

/** True when the event passes the filter (kinds, `group.*` wildcards, sandbox id). */
export function matches(event: SbxEvent, filter?: EventFilter): boolean {
  if (!filter) return true;
  if (filter.sandbox_id && event.sandbox_id !== filter.sandbox_id) return false;
  if (filter.types && filter.types.length > 0) {
    return filter.types.some((t) => t === '*' || t === event.type || (t.endsWith('.*') && event.type.startsWith(t.slice(0, -1))));
  }
  return true;
}

export type { EventKind, SbxEvent };
