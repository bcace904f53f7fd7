/**
 * HTTP/1.1 in an intercepted tunnel (DESIGN.md §15; intercept.ts terminates the TLS): the client's
 * requests, parsed by Node's strict parser one at a time, checked and rewritten (http-rewrite.ts),
 * go on over one upstream connection kept alive (another to the same address when it closes).
 * Bodies are piped both ways as they come, with back-pressure.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { forwardRaw, forwardRawList, injectSecrets, pairsOf, strictRefusal } from './http-rewrite.js';
import type { TunnelCtx } from './intercept.js';

/** node:http takes a raw list (`[name, value, …]`) where its types say a record. */
const asHeaders = (raw: string[]) => raw as unknown as Record<string, string>;

function plainAnswer(res: ServerResponse, status: number, text: string): void {
  if (res.headersSent) return void res.destroy();
  res.shouldKeepAlive = false;
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close', 'content-length': Buffer.byteLength(text) + 1 });
  res.end(`${text}\n`);
}

/** Serves the client's TLS socket; `first` is the upstream connection already made (null: it could not be verified). */
export function serveH1(c: TunnelCtx, sock: TLSSocket, first: TLSSocket | null): void {
  let spare = first;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  c.resources.add(agent);
  (agent as unknown as { createConnection: () => Socket }).createConnection = () => {
    const s = spare ?? c.connectUp(['http/1.1']);
    spare = null;
    return s;
  };
  const server = createServer({ requestTimeout: 0, headersTimeout: 30_000, keepAliveTimeout: c.idleMs });
  server.setTimeout(c.idleMs);
  server.on(
    'request',
    (req: IncomingMessage, res: ServerResponse) =>
      void forward(c, agent, first === null, req, res).catch(() => plainAnswer(res, 502, 'sbx egress: the secrets are unavailable')),
  );
  server.on('clientError', (_err, s: Socket) => {
    if (s.writable) s.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    else s.destroy();
  });
  server.emit('connection', sock);
}

async function forward(c: TunnelCtx, agent: Agent, failed: boolean, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const pairs = pairsOf(req.rawHeaders);
  const refusal = strictRefusal(req.method ?? '', pairs, c.target, c.port);
  if (refusal) return plainAnswer(res, refusal.status, refusal.text);
  if (failed) return plainAnswer(res, 502, `sbx egress: the upstream ${c.shown}:${c.port} could not be verified`);
  const url = req.url ?? '/';
  const rw = injectSecrets(pairs, url, await c.secrets(), c.target, c.port, false);
  if (!rw.ok) {
    c.onRefused();
    return plainAnswer(res, rw.refusal.status, rw.refusal.text);
  }
  if (rw.injected > 0) c.onInjected();
  const host = pairs.find(([k]) => k.toLowerCase() === 'host')!;
  const upstream = httpRequest({
    agent,
    host: c.shown,
    port: c.port,
    // The agent's one connection is made already: no server name to work out per request (not in the option's type).
    ...({ servername: '' } as object),
    method: req.method,
    path: url,
    setHost: false,
    headers: asHeaders(forwardRaw(rw.pairs, ['Host', host[1]])),
  });
  upstream.on('response', (ures) => {
    res.writeHead(ures.statusCode ?? 502, ures.statusMessage, asHeaders(forwardRawList(ures.rawHeaders)));
    ures.pipe(res);
  });
  upstream.on('error', () => plainAnswer(res, 502, `sbx egress: the upstream ${c.shown}:${c.port} failed`));
  res.once('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  // A request without a body (no Content-Length, no Transfer-Encoding) is sent whole at once.
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) {
    upstream.end();
    req.resume();
  } else req.pipe(upstream);
}
