/**
 * The sbx-agent's watch protocol (agent/watch.c, docs/agent.md "Watch"), decoded once for both
 * ends that speak it: the docker agent's WATCH stream inside a container and the host-mode agent
 * (`sbx-agent --watch`) over a mock or proot sandbox root. A payload is `[u8 kind][path NUL][old
 * path NUL]`; kind 0 is ready, 255 failed (`[u16 LE errno]`). The agent runs where sandbox code
 * can reach it: a path that is not absolute, or an unknown kind, is dropped, never passed on.
 */
import { AsyncQueue } from '../../../core/async-queue.js';
import { badRequest, notFound, SbxError } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';

const KINDS: Record<number, WatchEvent['type']> = { 1: 'create', 2: 'write', 3: 'remove', 4: 'rename', 5: 'chmod', 6: 'overflow' };
const READY = 0;
const FAILED = 255;
/** How long a watcher may take to put its watches in place (a deep tree: up to 4,096 directories). */
export const WATCH_READY_TIMEOUT_MS = 15_000;

/** One watch payload: an event, the watcher being ready, or why it failed (an errno). */
export type WatchFrame = { kind: 'event'; event: WatchEvent } | { kind: 'ready' } | { kind: 'failed'; errno: number };

/** Decodes one payload; null for what is not a well-formed frame (an event path that is not absolute among them). */
export function decodeWatchPayload(p: Buffer): WatchFrame | null {
  if (p.length < 1) return null;
  const kind = p[0]!;
  if (kind === READY) return { kind: 'ready' };
  if (kind === FAILED) return { kind: 'failed', errno: p.length >= 3 ? p.readUInt16LE(1) : 0 };
  const type = KINDS[kind];
  if (!type) return null;
  if (type === 'overflow') return { kind: 'event', event: { type } };
  const end = p.indexOf(0, 1);
  if (end < 0) return null;
  const path = p.subarray(1, end).toString('utf8');
  if (!path.startsWith('/')) return null;
  if (type !== 'rename') return { kind: 'event', event: { type, path } };
  const end2 = p.indexOf(0, end + 1);
  const old = p.subarray(end + 1, end2 < 0 ? p.length : end2).toString('utf8');
  if (!old.startsWith('/')) return null;
  return { kind: 'event', event: { type, path, old_path: old } };
}

/** Why a watch could not start, as the file API answers (errno numbers of Linux). */
export function watchRefusal(errno: number, path: string): SbxError {
  if (errno === 2) return notFound(`${path}: no such file or directory`);
  if (errno === 20 || errno === 40) return badRequest(`${path} is not a directory (symbolic links are not followed)`);
  if (errno === 13 || errno === 1) return badRequest(`${path}: permission denied`);
  if (errno === 36) return badRequest(`${path}: path too long`);
  return new SbxError('provider_error', `could not watch ${path} (errno ${errno})`);
}

/** Splits a byte stream into `[u32 LE len][payload]` frames. */
export function frameSplitter(onFrame: (payload: Buffer) => void): (chunk: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= 4) {
      const len = buf.readUInt32LE(0);
      if (buf.length < 4 + len) break;
      onFrame(buf.subarray(4, 4 + len));
      buf = buf.subarray(4 + len);
    }
  };
}

/**
 * One watch as its transport feeds it: `payload()` for each watch payload, `refuse()` / `fail()`
 * for a refusal the transport carries its own way, `end()` when the watcher is gone. `opened()`
 * waits until the watcher is ready (bounded), then yields its events; `stop` (given by the
 * transport: cancel, kill) runs once when the consumer stops, the signal aborts, or on overflow.
 */
export class WatchStream {
  private readonly queue = new AsyncQueue<WatchEvent>();
  private settle: ((err?: SbxError) => void) | null = null;
  private readonly ready = new Promise<void>((resolve, reject) => {
    this.settle = (err) => {
      this.settle = null;
      if (err) reject(err);
      else resolve();
    };
  });
  private stopped = false;

  constructor(
    private readonly path: string,
    private readonly onStop: () => void,
  ) {
    // A refusal nobody waits for yet (it came before `opened()`) is not an unhandled rejection.
    this.ready.catch(() => undefined);
  }

  payload(p: Buffer): void {
    const f = decodeWatchPayload(p);
    if (!f) return;
    if (f.kind === 'ready') this.settle?.();
    else if (f.kind === 'failed') this.refuse(f.errno);
    else {
      this.queue.push(f.event);
      if (f.event.type === 'overflow') this.stop();
    }
  }

  /** The watcher is in place. */
  started(): void {
    this.settle?.();
  }

  refuse(errno: number): void {
    this.settle?.(watchRefusal(errno, this.path));
  }

  /** The watcher failed or went away: before it was ready, `opened()` throws `err`. */
  fail(err: SbxError): void {
    this.settle?.(err);
    this.end();
  }

  end(): void {
    this.queue.end();
  }

  stop(): void {
    this.queue.end();
    if (this.stopped) return;
    this.stopped = true;
    this.onStop();
  }

  async opened(signal: AbortSignal, slow: string): Promise<AsyncIterable<WatchEvent>> {
    const onAbort = () => this.stop();
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => this.settle?.(new SbxError('timeout', slow)), WATCH_READY_TIMEOUT_MS);
    try {
      await this.ready;
    } catch (err) {
      this.stop();
      signal.removeEventListener('abort', onAbort);
      throw err;
    } finally {
      clearTimeout(timer);
    }
    if (signal.aborted) this.stop();
    return {
      [Symbol.asyncIterator]: () => {
        const it = this.queue[Symbol.asyncIterator]();
        return {
          next: () => it.next(),
          return: async () => {
            this.stop();
            signal.removeEventListener('abort', onAbort);
            return it.return!();
          },
        };
      },
    };
  }
}
