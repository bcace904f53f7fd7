import { badRequest, isAbortError, resourceLimit, SbxError } from '../errors.js';
import type { Clock, WatchEvent } from '../ports/index.js';
import type { Caller } from './caller.js';
import { sandboxPath } from './paths.js';
import type { SandboxService } from './service.js';

/** Watches open at once on one sandbox (DESIGN §16); one more → 429 `resource_limit`. */
export const MAX_WATCHES_PER_SANDBOX = 8;
/** Writes to one path within this window are one event (the first at once, one more at the window's end if more came). */
export const COALESCE_MS = 50;
/** Events a consumer may fall behind before it gets `overflow` and the stream ends (bounded memory). */
export const MAX_LAG_EVENTS = 10_000;

export interface WatchOptions {
  recursive: boolean;
}

/** A watch event as core hands it on: always stamped. */
export type StampedWatchEvent = WatchEvent & { ts: string };

/**
 * File watch (DESIGN §16), the one use case every transport (the API's NDJSON and SSE, E2B's
 * `watchDir`) builds on: the per-sandbox limit, write coalescing, the lag bound and the end on
 * destroy are enforced here once for every provider; providers only report what the kernel says.
 */
export class WatchService {
  private readonly open = new Map<string, number>();

  constructor(private readonly sandboxes: SandboxService) {}

  /** Watches open on a sandbox now. */
  count(sandboxId: string): number {
    return this.open.get(sandboxId) ?? 0;
  }

  /**
   * Resolves once the watch is in place (so every change after it is reported), with the events
   * as they happen; refusals (bad path, 404, not a directory, 429, 501) are thrown before. The
   * stream ends when `signal` aborts, the sandbox is destroyed, or after an `overflow`; a consumer
   * that stops iterating frees the provider's watch at once.
   */
  async watchFiles(
    caller: Caller,
    sandboxId: string,
    path: string,
    opts: WatchOptions,
    signal: AbortSignal,
  ): Promise<AsyncIterable<StampedWatchEvent>> {
    const p = sandboxPath(path);
    const { rec, provider, runtimeId } = await this.sandboxes.resolveRuntime(sandboxId, caller);
    if (!provider.watch) throw new SbxError('not_implemented', `provider ${rec.provider} cannot watch files`);
    if (this.count(rec.id) >= MAX_WATCHES_PER_SANDBOX) {
      throw resourceLimit(`sandbox ${rec.id} already has ${MAX_WATCHES_PER_SANDBOX} file watches open (the limit)`, {
        limit: MAX_WATCHES_PER_SANDBOX,
      });
    }
    this.open.set(rec.id, this.count(rec.id) + 1);
    const stop = new AbortController();
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      stop.abort();
      const n = this.count(rec.id) - 1;
      if (n > 0) this.open.set(rec.id, n);
      else this.open.delete(rec.id);
    };
    const onAbort = () => release();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const info = await provider.stat(runtimeId, p, signal);
      if (!info.is_dir) throw badRequest(`path ${p} is not a directory`);
      const events = await provider.watch(runtimeId, p, { recursive: opts.recursive }, stop.signal);
      if (signal.aborted) throw signal.reason;
      const deps = this.sandboxes.deps;
      const unsubscribe = deps.bus.subscribe((e) => {
        if (e.sandbox_id === rec.id && (e.type === 'sandbox.destroyed' || e.type === 'sandbox.error')) stop.abort();
      });
      return pipe(events, deps.clock, stop.signal, () => {
        unsubscribe();
        signal.removeEventListener('abort', onAbort);
        release();
      });
    } catch (err) {
      signal.removeEventListener('abort', onAbort);
      release();
      throw err;
    }
  }
}

/**
 * The provider's events through the coalescer into a bounded queue the consumer drains. The
 * provider is pulled as fast as it yields (never held back by the consumer), so the lag is ours to
 * bound: past MAX_LAG_EVENTS queued, `overflow` and the end.
 */
function pipe(source: AsyncIterable<WatchEvent>, clock: Clock, stop: AbortSignal, done: () => void): AsyncIterable<StampedWatchEvent> {
  const queue: StampedWatchEvent[] = [];
  let ended = false;
  let wake: (() => void) | null = null;
  const notify = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const finish = () => {
    if (ended) return;
    ended = true;
    coalescer.close();
    done();
    notify();
  };
  const emit = (ev: WatchEvent) => {
    if (ended) return;
    queue.push({ ...ev, ts: clock.now().toISOString() } as StampedWatchEvent);
    if (ev.type === 'overflow') return finish();
    if (queue.length >= MAX_LAG_EVENTS) {
      queue.push({ type: 'overflow', ts: clock.now().toISOString() });
      return finish();
    }
    notify();
  };
  const coalescer = new Coalescer(emit, COALESCE_MS);
  stop.addEventListener('abort', finish, { once: true });
  void (async () => {
    try {
      for await (const ev of source) {
        if (ended) break;
        coalescer.push(ev);
      }
    } catch (err) {
      // A failing provider ends the stream like a vanished runtime does; an abort is ours.
      if (!isAbortError(err) && !stop.aborted) coalescer.close();
    } finally {
      finish();
    }
  })();
  return {
    [Symbol.asyncIterator]() {
      return {
        async next(): Promise<IteratorResult<StampedWatchEvent>> {
          for (;;) {
            if (queue.length > 0) return { value: queue.shift()!, done: false };
            if (ended) return { value: undefined, done: true };
            await new Promise<void>((r) => (wake = r));
          }
        },
        async return(): Promise<IteratorResult<StampedWatchEvent>> {
          queue.length = 0;
          finish();
          return { value: undefined, done: true };
        },
      };
    },
  };
}

interface WriteWindow {
  timer: ReturnType<typeof setTimeout>;
  dirty: boolean;
}

/**
 * Writes coalesced per path: the first write of a path goes out at once and opens a window of
 * `ms`; writes inside it only mark it, and one `write` goes out when it closes (opening the next).
 * Any other event naming the path flushes its window first, so order is kept (a write is never
 * reported after the path's removal or rename).
 */
export class Coalescer {
  private readonly windows = new Map<string, WriteWindow>();

  constructor(
    private readonly emit: (ev: WatchEvent) => void,
    private readonly ms: number,
  ) {}

  push(ev: WatchEvent): void {
    if (ev.type === 'write') {
      const w = this.windows.get(ev.path);
      if (w) {
        w.dirty = true;
        return;
      }
      this.emit(ev);
      this.open(ev.path);
      return;
    }
    if (ev.type === 'overflow') {
      this.close();
      this.emit(ev);
      return;
    }
    this.flush(ev.path);
    if (ev.old_path !== undefined) this.flush(ev.old_path);
    this.emit(ev);
  }

  /** Drops every window (the stream ends). */
  close(): void {
    for (const w of this.windows.values()) clearTimeout(w.timer);
    this.windows.clear();
  }

  private open(path: string): void {
    const timer = setTimeout(() => {
      const w = this.windows.get(path);
      this.windows.delete(path);
      if (w?.dirty) {
        this.emit({ type: 'write', path });
        this.open(path);
      }
    }, this.ms);
    this.windows.set(path, { timer, dirty: false });
  }

  private flush(path: string): void {
    const w = this.windows.get(path);
    if (!w) return;
    clearTimeout(w.timer);
    this.windows.delete(path);
    if (w.dirty) this.emit({ type: 'write', path });
  }
}
