/**
 * The event stream (`GET /api/v1/events`, SSE) as an async iterator; with the undici transport on top of `eventsource`:
 * auth headers through a custom fetch, `Last-Event-ID` on the first connection, automatic
 * reconnection (the library resends the last id), and every named event kind delivered.
 */
import { SbxError } from '../contracts/errors.js';
import { fetchEventStream } from './events-fetch.js';
import { errorFromBody, type Http } from './http.js';
import { UndiciTransport } from './undici-transport.js';
import type { SbxEvent } from './types.js';

export interface EventStreamOptions {
  /** Kinds or `group.*` wildcards (`sandbox.created`, `exec.*`). */
  types?: string[];
  sandboxId?: string;
  /** Replay history after this id. */
  lastEventId?: string | number;
  signal?: AbortSignal;
  /** Connection state changes: `open` on every (re)connect, `reconnecting` after a drop. */
  onState?: (state: 'open' | 'reconnecting', detail?: string) => void;
}

const EVENTS_PATH = '/api/v1/events';

/** Opens the stream; the iterator ends when `signal` aborts or `return()` is called. */
export async function* eventStream(http: Http, opts: EventStreamOptions = {}): AsyncGenerator<SbxEvent> {
  // Other transports (fetch in a browser) read the SSE bytes themselves: no eventsource, no undici.
  if (!(http.transport instanceof UndiciTransport)) return yield* fetchEventStream(http, opts);
  const [{ EventSource }, { undici, agent }] = await Promise.all([import('eventsource'), http.transport.undici()]);
  const query: Record<string, string | undefined> = {
    types: opts.types && opts.types.length > 0 ? opts.types.join(',') : undefined,
    sandbox_id: opts.sandboxId,
  };
  const url = http.url(EVENTS_PATH, query);

  const queue: SbxEvent[] = [];
  let failure: unknown;
  let opened = false;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  let lastHttpError: SbxError | undefined;
  let lastNetworkError: unknown;

  const fetchWithAuth = async (input: string | URL, init?: Record<string, unknown>) => {
    const given = (init?.headers ?? {}) as Record<string, string>;
    const headers: Record<string, string> = { ...given, ...http.headersFor(EVENTS_PATH) };
    if (!given['Last-Event-ID'] && opts.lastEventId !== undefined) headers['Last-Event-ID'] = String(opts.lastEventId);
    try {
      const res = await undici.fetch(input, { ...(init as object), headers, dispatcher: agent });
      if (res.status !== 200) {
        lastHttpError = errorFromBody(res.status, await res.text().catch(() => ''), 'GET', EVENTS_PATH, http.baseUrl);
        return new undici.Response(null, { status: res.status });
      }
      return res;
    } catch (err) {
      lastNetworkError = err;
      throw err;
    }
  };

  // Named SSE events (`event: sandbox.created`) only reach listeners registered for that exact
  // name; overriding dispatchEvent sees every kind, including ones this client does not know.
  class AllEvents extends EventSource {
    override dispatchEvent(event: Event): boolean {
      if (event.type === 'open') {
        opened = true;
        lastNetworkError = undefined;
        opts.onState?.('open');
      } else if (event.type === 'error') {
        onError(event as Event & { code?: number; message?: string });
      } else if ('data' in event) {
        try {
          const parsed = JSON.parse(String((event as MessageEvent).data)) as SbxEvent;
          if (parsed && typeof parsed === 'object') {
            queue.push(parsed);
            notify();
          }
        } catch {
          // Not an event body (e.g. a stray message); nothing to deliver.
        }
      }
      return super.dispatchEvent(event);
    }
  }

  function onError(ev: { code?: number; message?: string }) {
    if (source.readyState === source.CLOSED) {
      failure = lastHttpError ?? new SbxError('unavailable', `event stream closed: ${ev.message ?? 'unknown error'}`);
      notify();
      return;
    }
    if (!opened && lastNetworkError !== undefined) {
      // Never connected: report unreachable instead of retrying forever.
      failure = http.unreachable(lastNetworkError);
      source.close();
      notify();
      return;
    }
    opts.onState?.('reconnecting', ev.message);
  }

  const source = new AllEvents(url, { fetch: fetchWithAuth as never });
  const onAbort = () => notify();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      if (queue.length > 0) {
        yield queue.shift()!;
        continue;
      }
      if (failure !== undefined) throw failure;
      if (opts.signal?.aborted) return;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    source.close();
  }
}
