/**
 * The undici transport: the client's default in Node (the CLI's). One keep-alive Agent, no
 * header/body timeouts (exec and event streams may stay quiet for long; commands carry their own
 * deadlines). undici is imported on first use, so merely loading the client (e.g. for
 * `sbx --help`) costs nothing and a browser never loads it.
 */
import type { ResponseBody, Transport, TransportRequest, TransportResponse } from './transport.js';

type Undici = typeof import('undici');
type Agent = InstanceType<Undici['Agent']>;

/** undici's response body: a Node Readable with the body mixin. */
interface UndiciBody extends AsyncIterable<Uint8Array> {
  text(): Promise<string>;
  arrayBuffer(): Promise<ArrayBuffer>;
  destroyed: boolean;
  destroy(): void;
}

export class UndiciTransport implements Transport {
  readonly userAgent = 'sbx-cli';
  private lib?: Promise<{ undici: Undici; agent: Agent }>;

  /** undici and the shared Agent, created once (the event stream uses them too). */
  undici(): Promise<{ undici: Undici; agent: Agent }> {
    this.lib ??= import('undici').then((undici) => ({
      undici,
      agent: new undici.Agent({ keepAliveTimeout: 10_000, connectTimeout: 10_000, headersTimeout: 0, bodyTimeout: 0 }),
    }));
    return this.lib;
  }

  async request(req: TransportRequest): Promise<TransportResponse> {
    const { undici, agent } = await this.undici();
    const res = await undici.request(req.url, {
      method: req.method as 'GET',
      headers: req.headers,
      body: req.body,
      dispatcher: agent,
      signal: req.signal,
    });
    return { status: res.statusCode, headers: res.headers, body: undiciBody(res.body as unknown as UndiciBody) };
  }

  async close(): Promise<void> {
    if (!this.lib) return;
    const { agent } = await this.lib;
    // close() waits for in-flight requests; a stream left open must not keep the process alive.
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), 500);
    });
    const result = await Promise.race([agent.close().then(() => 'closed' as const), late]);
    clearTimeout(timer);
    if (result === 'late') await agent.destroy().catch(() => undefined);
  }
}

function undiciBody(body: UndiciBody): ResponseBody {
  return {
    text: () => body.text(),
    arrayBuffer: () => body.arrayBuffer(),
    cancel() {
      if (!body.destroyed) body.destroy();
    },
    [Symbol.asyncIterator]: () => body[Symbol.asyncIterator](),
  };
}
