import { Agent, fetch } from 'undici';

/**
 * A real SSE reader over fetch for tests: frames as they arrive, comments included. Each stream
 * has its own undici Agent, destroyed on close: the shared global pool opens a spare connection
 * after an aborted stream, which would hold the server's graceful close for a minute.
 */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comments: string[];
  retry?: string;
}

export interface SseStream {
  status: number;
  headers: { get(name: string): string | null };
  frames: SseFrame[];
  /** Everything received so far, verbatim. */
  raw(): string;
  /** Resolves when `pred` holds over the frames received (checks on every chunk), or rejects after `ms`. */
  until(pred: (frames: SseFrame[]) => boolean, ms?: number): Promise<SseFrame[]>;
  /** Event frames only, data parsed. */
  events(): Array<{ id: number; type: string; sandbox_id?: string; owner_id?: string; data?: Record<string, unknown> }>;
  close(): void;
}

export function parseFrame(block: string): SseFrame {
  const f: SseFrame = { comments: [] };
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) f.comments.push(line.slice(1).trim());
    else if (line.startsWith('id: ')) f.id = line.slice(4);
    else if (line.startsWith('event: ')) f.event = line.slice(7);
    else if (line.startsWith('data: ')) f.data = (f.data === undefined ? '' : f.data + '\n') + line.slice(6);
    else if (line.startsWith('retry: ')) f.retry = line.slice(7);
  }
  return f;
}

export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseStream> {
  const ac = new AbortController();
  const agent = new Agent();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: ac.signal, dispatcher: agent });
  const frames: SseFrame[] = [];
  let text = '';
  let pending = '';
  let done = false;
  const waiters = new Set<() => void>();
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  if (res.body && res.status === 200) {
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    void (async () => {
      try {
        for (;;) {
          const { value, done: end } = await reader.read();
          if (end) break;
          const chunk = decoder.decode(value, { stream: true });
          text += chunk;
          pending += chunk;
          let i: number;
          while ((i = pending.indexOf('\n\n')) >= 0) {
            frames.push(parseFrame(pending.slice(0, i)));
            pending = pending.slice(i + 2);
          }
          wake();
        }
      } catch {
        // aborted by close()
      } finally {
        done = true;
        wake();
      }
    })();
  } else {
    text = await res.text();
    done = true;
  }
  return {
    status: res.status,
    headers: res.headers,
    frames,
    raw: () => text,
    until(pred, ms = 5000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (pred(frames)) {
            cleanup();
            resolve(frames);
          } else if (done) {
            cleanup();
            reject(new Error(`stream ended before the condition held; got:\n${text}`));
          }
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`timed out after ${ms} ms; got:\n${text.slice(-4000)}`));
        }, ms);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    events() {
      return frames.filter((f) => f.data !== undefined).map((f) => JSON.parse(f.data!));
    },
    close() {
      ac.abort();
      void agent.destroy().catch(() => undefined);
    },
  };
}
