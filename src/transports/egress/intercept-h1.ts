/**
 * HTTP/1.1 in an intercepted tunnel (DESIGN.md §15; intercept.ts terminates the TLS): the client's
 * requests, parsed by Node's strict parser one at a time, checked and rewritten (http-rewrite.ts),
 * go on over one upstream connection kept alive (another to the same address when it closes).
 * Bodies are piped both ways as they come, with back-pressure.
 */
import { Agent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { forwardPairs, injectSecrets, pairsOf, strictRefusal, type HeaderPair } from './http-rewrite.js';
import type { TunnelCtx } from './intercept.js';

const flat = (pairs: readonly HeaderPair[]) => pairs.flat() as unknown as Record<string, string>;

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
    method: req.method,
    path: url,
    setHost: false,
    headers: flat([['Host', host[1]], ...forwardPairs(rw.pairs)]),
  });
  upstream.on('response', (ures) => {
    res.writeHead(ures.statusCode ?? 502, ures.statusMessage, flat(forwardPairs(pairsOf(ures.rawHeaders))));
    ures.pipe(res);
  });
  upstream.on('error', () => plainAnswer(res, 502, `sbx egress: the upstream ${c.shown}:${c.port} failed`));
  res.once('close', () => {
    if (!res.writableFinished) upstream.destroy();
  });
  req.pipe(upstream);
}
