/**
 * MCP over streamable HTTP at `/mcp` in `sbx serve` (issue 19, `server.mcp`): the same tools as
 * `sbx mcp`, stateless (a server per request, no session), behind the API key like any /api/v1
 * route. The tools' typed client does not go out over the network: its requests are injected into
 * this same fastify app (streamed, abortable) with the caller's own credentials, so every call
 * passes the same auth, ownership, rate limit and validation as a direct API call.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Client } from '../../client/client.js';
import type { ResponseBody, Transport, TransportRequest, TransportResponse } from '../../client/transport.js';
import { VERSION } from '../../version.js';

export const MCP_PATH = '/mcp';
/** Origin the injected requests claim: a loopback name the dev-box guard accepts. */
const INTERNAL = 'http://localhost';

/**
 * A client transport into `app` itself (fastify's inject), streaming response bodies. The requests
 * come from the caller's address, so what depends on it (the owner of an anonymous caller, the
 * rate-limit key) is the caller's, as on a direct API call.
 */
export class InjectTransport implements Transport {
  readonly userAgent = 'sbx-mcp';
  constructor(
    private readonly app: FastifyInstance,
    private readonly remoteAddress: string,
  ) {}

  async request(req: TransportRequest): Promise<TransportResponse> {
    const url = new URL(req.url);
    const res = await this.app.inject({
      method: req.method as 'GET',
      url: url.pathname + url.search,
      headers: req.headers,
      ...(req.body !== undefined
        ? { payload: typeof req.body === 'string' ? req.body : Buffer.from(req.body.buffer, req.body.byteOffset, req.body.byteLength) }
        : {}),
      ...(req.signal ? { signal: req.signal } : {}),
      remoteAddress: this.remoteAddress,
      payloadAsStream: true,
    });
    return { status: res.statusCode, headers: res.headers as TransportResponse['headers'], body: streamBody(res.stream()) };
  }
}

function streamBody(stream: Readable): ResponseBody {
  const all = async (): Promise<Buffer> => {
    const parts: Buffer[] = [];
    for await (const c of stream) parts.push(Buffer.from(c as Uint8Array));
    return Buffer.concat(parts);
  };
  return {
    async text() {
      return (await all()).toString('utf8');
    },
    async arrayBuffer() {
      const b = await all();
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    },
    cancel() {
      stream.destroy();
    },
    async *[Symbol.asyncIterator]() {
      for await (const c of stream) yield c as Uint8Array;
    },
  };
}

const header = (request: FastifyRequest, name: string): string | undefined => {
  const v = request.headers[name];
  return typeof v === 'string' && v !== '' ? v : undefined;
};

/** `POST /mcp` (JSON-RPC in, JSON or SSE out); GET and DELETE answer 405 (no sessions, no server-initiated stream). */
export function mcpRoutes(app: FastifyInstance, deps: { secrets?: readonly string[] }): void {
  app.post(MCP_PATH, { schema: { hide: true } as never, bodyLimit: 16 * 1024 * 1024 }, async (request, reply) => {
    const [{ createSbxMcpServer }, { StreamableHTTPServerTransport }] = await Promise.all([
      import('./server.js'),
      import('@modelcontextprotocol/sdk/server/streamableHttp.js'),
    ]);
    // The caller's own credentials, exactly as sent: the tools act as the caller.
    const apiKey = header(request, 'x-api-key');
    const adminKey = header(request, 'x-admin-api-key');
    const userId = header(request, 'x-user-id');
    const transport = new InjectTransport(app, request.ip);
    const client = new Client({
      url: INTERNAL,
      transport,
      ...(apiKey ? { apiKey } : {}),
      ...(adminKey ? { adminKey } : {}),
      ...(userId ? { userId } : {}),
    });
    const server = createSbxMcpServer({ client, version: VERSION, secrets: [...(deps.secrets ?? []), apiKey, adminKey] });
    const http = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    reply.hijack();
    const res = reply.raw as ServerResponse;
    res.once('close', () => {
      void http.close().catch(() => undefined);
      void server.close().catch(() => undefined);
    });
    await server.connect(http);
    await http.handleRequest(request.raw as IncomingMessage, res, request.body);
  });
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: MCP_PATH,
      schema: { hide: true } as never,
      handler: async (_request, reply) =>
        reply
          .code(405)
          .header('Allow', 'POST')
          .send({ code: 'method_not_allowed', message: 'MCP here is stateless streamable HTTP: send JSON-RPC with POST /mcp' }),
    });
  }
}
