/**
 * The Node transport: the client's default in Node (the CLI's). Requests go through Node's own
 * `http`/`https` with one keep-alive agent per scheme — built-in modules, so a command such as
 * `sbx exec ID true` loads no HTTP library at all (undici's import alone cost more than the whole
 * request: issue 33). It stays an UndiciTransport so the event stream (eventsource over undici)
 * keeps its library, loaded only when a command reads events.
 * No header or body timeouts (exec and event streams may stay quiet for long; commands carry their
 * own deadlines); connecting has a 10 s deadline.
 * A request's signal is one abort listener (not `http.request`'s `signal` option, which loads Node's
 * stream helpers) and a body is read through its own events (not the Readable async iterator): the
 * same errors and back-pressure for ~4 ms less per CLI process (issue 33).
 */
import type { Agent as HttpAgent, ClientRequest, IncomingMessage } from 'node:http';
import type { ResponseBody, TransportRequest, TransportResponse } from './transport.js';
import { UndiciTransport } from './undici-transport.js';

const CONNECT_TIMEOUT_MS = 10_000;

type HttpModule = typeof import('node:http');

export class NodeTransport extends UndiciTransport {
  private readonly agents = new Map<string, { mod: HttpModule; agent: HttpAgent }>();

  private async client(protocol: string): Promise<{ mod: HttpModule; agent: HttpAgent }> {
    let c = this.agents.get(protocol);
    if (!c) {
      const mod = (protocol === 'https:' ? await import('node:https') : await import('node:http')) as HttpModule;
      c = { mod, agent: new mod.Agent({ keepAlive: true, keepAliveMsecs: 10_000 }) };
      this.agents.set(protocol, c);
    }
    return c;
  }

  override async request(req: TransportRequest): Promise<TransportResponse> {
    const url = new URL(req.url);
    const { mod, agent } = await this.client(url.protocol);
    const headers: Record<string, string> = { ...req.headers };
    if (req.body !== undefined && !Object.keys(headers).some((k) => k.toLowerCase() === 'content-length')) {
      headers['content-length'] = String(typeof req.body === 'string' ? Buffer.byteLength(req.body) : req.body.byteLength);
    }
    return new Promise<TransportResponse>((resolve, reject) => {
      const request: ClientRequest = mod.request(url, { method: req.method, headers, agent }, (res) => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: nodeBody(res) });
      });
      request.once('error', reject);
      if (req.signal) abortOn(req.signal, request);
      request.once('socket', (socket) => {
        if (!socket.connecting) return;
        const timer = setTimeout(
          () => request.destroy(Object.assign(new Error('connection timed out'), { code: 'ETIMEDOUT' })),
          CONNECT_TIMEOUT_MS,
        );
        socket.once('connect', () => clearTimeout(timer));
        socket.once('close', () => clearTimeout(timer));
      });
      request.end(req.body);
    });
  }

  override async close(): Promise<void> {
    for (const { agent } of this.agents.values()) agent.destroy();
    this.agents.clear();
    await super.close();
  }
}

/**
 * What `http.request`'s `signal` option does: an abort, before or during the response, destroys the
 * request (and so its response body) with an AbortError whose cause is the signal's reason. The
 * listener goes when the request closes (the response read or the request failed).
 */
function abortOn(signal: AbortSignal, request: ClientRequest): void {
  const onAbort = () => request.destroy(abortError(signal.reason));
  if (signal.aborted) {
    onAbort();
    return;
  }
  signal.addEventListener('abort', onAbort, { once: true });
  request.once('close', () => signal.removeEventListener('abort', onAbort));
}

/** The AbortError of an aborted request (what `http.request`'s `signal` option throws). */
export function abortError(cause: unknown): Error {
  return Object.assign(new Error('The operation was aborted', { cause }), { name: 'AbortError', code: 'ABORT_ERR' });
}

function prematureClose(): Error {
  return Object.assign(new Error('Premature close'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
}

/** The whole body: every chunk until 'end'; the stream's error, or premature close, rejects. */
function collect(res: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let ended = false;
    res.on('data', (chunk: Buffer) => parts.push(chunk));
    res.once('end', () => {
      ended = true;
      resolve(Buffer.concat(parts));
    });
    res.once('error', reject);
    res.once('close', () => {
      if (!ended) reject(res.errored ?? prematureClose());
    });
  });
}

/**
 * Byte chunks as the consumer asks for them (paused mode: nothing is read ahead of the stream's own
 * buffer, so a slow consumer holds the sender back). Ends at 'end'; throws the stream's error, or
 * premature close; `return` (a `break`) destroys the response and frees its connection.
 */
function iterate(res: IncomingMessage): AsyncIterator<Uint8Array> {
  let ended = false;
  let failure: Error | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  res.on('readable', notify);
  res.once('end', () => {
    ended = true;
    notify();
  });
  res.once('error', (err: Error) => {
    failure ??= err;
    notify();
  });
  res.once('close', () => {
    if (!ended) failure ??= res.errored ?? prematureClose();
    notify();
  });
  return {
    async next(): Promise<IteratorResult<Uint8Array>> {
      for (;;) {
        const chunk = res.destroyed ? null : (res.read() as Buffer | null);
        if (chunk !== null) return { value: chunk, done: false };
        if (failure) throw failure;
        if (ended) return { value: undefined, done: true };
        await new Promise<void>((r) => {
          wake = r;
        });
      }
    },
    async return(): Promise<IteratorResult<Uint8Array>> {
      if (!res.destroyed) res.destroy();
      return { value: undefined, done: true };
    },
  };
}

function nodeBody(res: IncomingMessage): ResponseBody {
  return {
    text: async () => (await collect(res)).toString('utf8'),
    arrayBuffer: async () => {
      const b = await collect(res);
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    },
    cancel() {
      if (!res.destroyed) res.destroy();
    },
    [Symbol.asyncIterator]: () => iterate(res),
  };
}
