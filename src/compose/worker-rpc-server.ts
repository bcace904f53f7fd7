/** The worker's RPC server as `sbx worker` runs it: its listen address, TLS, advertised URL and drain. */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { SbxConfig } from '../config/index.js';
import { buildRpcApp, callsInFlight } from '../transports/worker-rpc/server/app.js';

const DRAIN_WAIT_MS = 30_000;

/** `host:port` → URL; a bare port means all interfaces. */
function listenParts(addr: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(addr.trim()) ?? /^()()(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`worker.listen_addr must be HOST:PORT, not ${JSON.stringify(addr)}`);
  const port = Number(m[3]);
  if (!(port >= 0 && port <= 65535)) throw new Error(`worker.listen_addr has an invalid port: ${JSON.stringify(addr)}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

export interface RpcServer {
  app: FastifyInstance;
  listen: { host: string; port: number };
  /** The advertised URL (`worker.advertise_url`, or from the listen address). */
  url: string;
}

/** The RPC server on `worker.listen_addr`, with TLS when `worker.rpc_tls` asks; built, not yet listening. */
export async function rpcServer(config: SbxConfig, deps: Parameters<typeof buildRpcApp>[0]): Promise<RpcServer> {
  const w = config.worker;
  const tls = w.rpc_tls;
  const { host, port } = listenParts(w.listen_addr!);
  const read = (key: string, file: string | undefined) => {
    if (!file) throw new Error(`worker.rpc_tls.enabled needs worker.rpc_tls.${key}`);
    try {
      return readFileSync(file);
    } catch (err) {
      throw new Error(`worker.rpc_tls.${key}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
  };
  const https = tls.enabled
    ? {
        cert: read('server_cert_file', tls.server_cert_file),
        key: read('server_key_file', tls.server_key_file),
        ...(tls.client_ca_file ? { ca: read('client_ca_file', tls.client_ca_file) } : {}),
      }
    : undefined;
  const app = await buildRpcApp(deps, https ? { https } : {});
  const url = (
    w.advertise_url ||
    `${tls.enabled ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? hostname() : host}:${port}`
  ).replace(/\/+$/, '');
  return { app, listen: { host, port }, url };
}

/** The RPC server drains: no new connections; the calls in flight finish (at most DRAIN_WAIT_MS), then every connection goes. */
export async function drainRpc(rpc: FastifyInstance): Promise<void> {
  const closing = rpc.close();
  const deadline = performance.now() + DRAIN_WAIT_MS;
  while (callsInFlight(rpc) > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  // Idle keep-alives and ones whose call already ended alike.
  rpc.server.closeAllConnections();
  await Promise.race([closing, new Promise((r) => setTimeout(r, 5_000).unref())]);
}
