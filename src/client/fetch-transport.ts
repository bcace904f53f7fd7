/**
 * The fetch transport: global `fetch`, `Headers`, `ReadableStream` — no Node module, no Buffer —
 * so the typed client runs in browsers (the dashboard uses it) and in Node 20 alike.
 *
 *   import { Client, FetchTransport } from 'sbx-cli/browser';
 *   const sbx = new Client({ url: location.origin, apiKey, transport: new FetchTransport({ init: { cache: 'no-store' } }) });
 */
import type { ResponseBody, Transport, TransportRequest, TransportResponse } from './transport.js';

export interface FetchTransportOptions {
  /** The fetch to call; default the global one. */
  fetch?: typeof fetch;
  /** Extra `RequestInit` members on every request (e.g. `{ cache: 'no-store', credentials: 'omit' }`). */
  init?: Omit<RequestInit, 'method' | 'headers' | 'body' | 'signal'>;
}

export class FetchTransport implements Transport {
  private readonly fetchFn: typeof fetch;
  private readonly init: FetchTransportOptions['init'];

  constructor(opts: FetchTransportOptions = {}) {
    const f = opts.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (typeof f !== 'function')
      throw new TypeError('FetchTransport needs a global fetch (Node 18+ or a browser) or `fetch` in its options');
    // A bare reference to window.fetch called as a method of another object throws "Illegal invocation".
    this.fetchFn = opts.fetch ?? ((input, init) => f(input, init));
    this.init = opts.init;
  }

  async request(req: TransportRequest): Promise<TransportResponse> {
    const res = await this.fetchFn(req.url, {
      ...this.init,
      method: req.method,
      headers: req.headers,
      body: req.body === undefined ? undefined : typeof req.body === 'string' ? req.body : (req.body as Uint8Array<ArrayBuffer>),
      signal: req.signal,
    });
    const headers: Record<string, string> = {};
    res.headers.forEach((value, name) => {
      headers[name.toLowerCase()] = value;
    });
    return { status: res.status, headers, body: fetchBody(res) };
  }
}

function fetchBody(res: Response): ResponseBody {
  let reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  return {
    text: () => res.text(),
    arrayBuffer: () => res.arrayBuffer(),
    cancel() {
      // While iterated the reader holds the lock; afterwards (or never read) the stream itself.
      const done = res.body?.locked && reader ? reader.cancel() : res.body && !res.body.locked ? res.body.cancel() : undefined;
      void done?.catch(() => undefined);
    },
    async *[Symbol.asyncIterator]() {
      if (!res.body) return;
      // A reader rather than `for await` on the stream: not every browser iterates ReadableStreams.
      reader = res.body.getReader();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          if (value.byteLength > 0) yield value;
        }
      } finally {
        reader.releaseLock();
      }
    },
  };
}
