/**
 * The Node transport: the client's default in Node (the CLI's). Requests go through Node's own
 * `http`/`https` with one keep-alive agent per scheme — built-in modules, so a command such as
 * `sbx exec ID true` loads no HTTP library at all (undici's import alone cost more than the whole
 * request: issue 33). It stays an UndiciTransport so the event stream (eventsource over undici)
 * keeps its library, loaded only when a command reads events.
 * No header or body timeouts (exec and event streams may stay quiet for long; commands carry their
 * own deadlines); connecting has a 10 s deadline.
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
      const request: ClientRequest = mod.request(url, { method: req.method, headers, agent, signal: req.signal }, (res) => {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: nodeBody(res) });
      });
      request.once('error', reject);
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

function nodeBody(res: IncomingMessage): ResponseBody {
  const collect = async (): Promise<Buffer> => {
    const parts: Buffer[] = [];
    for await (const chunk of res) parts.push(chunk as Buffer);
    return Buffer.concat(parts);
  };
  return {
    text: async () => (await collect()).toString('utf8'),
    arrayBuffer: async () => {
      const b = await collect();
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    },
    cancel() {
      if (!res.destroyed) res.destroy();
    },
    [Symbol.asyncIterator]: () => res[Symbol.asyncIterator]() as AsyncIterator<Uint8Array>,
  };
}
