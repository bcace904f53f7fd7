/** Longest keepalive interval honoured (seconds); the SDK asks for 50. */
const MAX_INTERVAL_S = 300;
/** Used when the client names none: under undici's 300 s body timeout. */
const DEFAULT_INTERVAL_S = 50;

/** The keepalive interval a client asked for in `Keepalive-Ping-Interval` (seconds), bounded. */
export function keepaliveMs(header: string | null): number {
  const n = Number(header);
  const s = Number.isInteger(n) && n > 0 ? Math.min(n, MAX_INTERVAL_S) : DEFAULT_INTERVAL_S;
  return s * 1000;
}

/**
 * Yields the items of `source` as they come, and `ping()` whenever `ms` pass without one (E2B's
 * keepalive events, so a quiet stream is not cut by a proxy or a client's idle timeout). Pulls
 * `source` only as fast as the consumer takes items (back-pressure stays with the consumer);
 * ends `source` when the consumer stops or `signal` aborts.
 */
export async function* withKeepalive<T>(source: AsyncIterable<T>, ms: number, ping: () => T, signal: AbortSignal): AsyncGenerator<T> {
  const it = source[Symbol.asyncIterator]();
  let pending: Promise<IteratorResult<T>> | null = null;
  try {
    for (;;) {
      if (signal.aborted) return;
      pending ??= it.next();
      let timer: ReturnType<typeof setTimeout> | undefined;
      let onAbort: (() => void) | undefined;
      const tick = new Promise<'tick' | 'abort'>((resolve) => {
        timer = setTimeout(() => resolve('tick'), ms);
        onAbort = () => resolve('abort');
        signal.addEventListener('abort', onAbort, { once: true });
      });
      const r = await Promise.race([pending, tick]);
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort!);
      if (r === 'abort') return;
      if (r === 'tick') {
        yield ping();
        continue;
      }
      pending = null;
      if (r.done) return;
      yield r.value;
    }
  } finally {
    // Ends the source (its cleanup runs); a pending next() settles on its own.
    void it.return?.().catch(() => undefined);
  }
}
