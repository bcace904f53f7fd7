/**
 * The event stream over any Transport (the fetch one in browsers): the SSE format read from the
 * response bytes, `Last-Event-ID` on the first connection and on every reconnection, the server's
 * `retry:` delay honoured. HTTP refusals end the stream with the mapped SbxError; a first
 * connection that cannot be made is `unavailable`; a drop after that reconnects.
 */
import { SbxError } from '../contracts/errors.js';
import type { EventStreamOptions } from './events.js';
import type { Http } from './http.js';
import type { SbxEvent } from './types.js';

const EVENTS_PATH = '/api/v1/events';

export async function* fetchEventStream(http: Http, opts: EventStreamOptions): AsyncGenerator<SbxEvent> {
  const query = { types: opts.types && opts.types.length > 0 ? opts.types.join(',') : undefined, sandbox_id: opts.sandboxId };
  let lastId = opts.lastEventId !== undefined ? String(opts.lastEventId) : '';
  let retryMs = 3000;
  let opened = false;
  while (!opts.signal?.aborted) {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (lastId !== '') headers['last-event-id'] = lastId;
    let res;
    try {
      res = await http.send('GET', EVENTS_PATH, { query, headers, signal: opts.signal });
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (!opened) throw err;
      opts.onState?.('reconnecting', (err as Error).message);
      await sleep(retryMs, opts.signal);
      continue;
    }
    await http.check(res, 'GET', EVENTS_PATH);
    opened = true;
    opts.onState?.('open');
    let detail = 'stream ended';
    try {
      for await (const frame of sseFrames(res.body)) {
        if (frame.id !== undefined) lastId = frame.id;
        if (frame.retry !== undefined) retryMs = frame.retry;
        if (frame.data === undefined) continue;
        let parsed: unknown;
        try {
          parsed = JSON.parse(frame.data);
        } catch {
          continue; // not an event body
        }
        if (parsed && typeof parsed === 'object') yield parsed as SbxEvent;
      }
    } catch (err) {
      if (opts.signal?.aborted) return;
      if (err instanceof SbxError) throw err;
      detail = (err as Error).message;
    } finally {
      res.body.cancel();
    }
    if (opts.signal?.aborted) return;
    opts.onState?.('reconnecting', detail);
    await sleep(retryMs, opts.signal);
  }
}

interface Frame {
  id?: string;
  data?: string;
  retry?: number;
}

/** SSE frames of a byte stream (fields `id`, `data`, `retry`; `event` names are in the JSON too). */
export async function* sseFrames(body: AsyncIterable<Uint8Array>): AsyncGenerator<Frame> {
  const decoder = new TextDecoder();
  let buf = '';
  let frame: Frame = {};
  let data: string[] = [];
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(buf.startsWith('\r\n', nl) ? nl + 2 : nl + 1);
      if (line === '') {
        if (data.length > 0) frame.data = data.join('\n');
        if (frame.data !== undefined || frame.id !== undefined || frame.retry !== undefined) yield frame;
        frame = {};
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') data.push(value);
      else if (field === 'id' && !value.includes('\0')) frame.id = value;
      else if (field === 'retry' && /^\d+$/.test(value)) frame.retry = Number(value);
    }
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
