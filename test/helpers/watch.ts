/**
 * A file watch client for integration tests: opens `GET …/files/watch` on a real server and
 * collects the NDJSON events as they arrive; `until` waits (bounded) for a condition on them, or the end.
 */
import { expect } from 'vitest';

export interface WatchLine {
  type: string;
  path?: string;
  old_path?: string;
  ts: string;
}

export interface OpenWatch {
  status: number;
  /** The error body when the watch was refused. */
  error?: { code: string; message: string };
  events: WatchLine[];
  ended: boolean;
  /** Waits until `pred(events)` holds or the stream ended, at most `ms`; then returns the events. */
  until(pred: (events: WatchLine[]) => boolean, ms?: number): Promise<WatchLine[]>;
  close(): void;
}

export async function openWatch(
  base: string,
  id: string,
  path: string,
  opts: { recursive?: boolean; headers?: Record<string, string> } = {},
): Promise<OpenWatch> {
  const ac = new AbortController();
  const wakers = new Set<() => void>();
  const wake = () => {
    for (const f of [...wakers]) f();
  };
  const q = new URLSearchParams({ path, ...(opts.recursive === false ? { recursive: 'false' } : {}) });
  const res = await fetch(`${base}/api/v1/sandboxes/${id}/files/watch?${q}`, { signal: ac.signal, headers: opts.headers });
  const w: OpenWatch = {
    status: res.status,
    events: [],
    ended: false,
    async until(pred, ms = 10_000) {
      if (pred(w.events) || w.ended) return w.events;
      // Woken by each event (and the end), at most `ms`.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => done(), ms);
        const done = () => {
          clearTimeout(timer);
          wakers.delete(check);
          resolve();
        };
        const check = () => {
          if (pred(w.events) || w.ended) done();
        };
        wakers.add(check);
      });
      return w.events;
    },
    close: () => ac.abort(),
  };
  if (res.status !== 200) {
    w.error = (await res.json()) as { code: string; message: string };
    w.ended = true;
    return w;
  }
  expect(res.headers.get('content-type')).toContain('application/x-ndjson');
  void (async () => {
    const dec = new TextDecoder();
    let buf = '';
    try {
      for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
        buf += dec.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim()) w.events.push(JSON.parse(line) as WatchLine);
        }
        wake();
      }
    } catch {
      /* aborted */
    } finally {
      w.ended = true;
      wake();
    }
  })();
  return w;
}

/** Events as short strings: `type path [old_path]`. */
export const brief = (events: WatchLine[]): string[] =>
  events.map((e) => [e.type, e.path, e.old_path].filter((v) => v !== undefined).join(' '));
