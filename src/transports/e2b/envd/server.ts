import { type IncomingMessage, type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { HandlerContext } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { SbxError } from '../../../core/errors.js';
import type { EnvdDeps } from './deps.js';
import { httpErrorOf, toConnectError } from './errors.js';
import { serveFiles } from './files-http.js';
import { filesystemService } from './filesystem.js';
import { Filesystem } from './gen/filesystem/filesystem_pb.js';
import { Process } from './gen/process/process_pb.js';
import { processService } from './process.js';
import {
  ACCESS_TOKEN_HEADER,
  ENVD_PORT,
  ENVD_PREFIX,
  type EnvdTarget,
  resolveTarget,
  SANDBOX_ID_HEADER,
  SANDBOX_PORT_HEADER,
} from './target.js';

/** Longest message a Connect call may send (a SendInput chunk, a path): envd's calls are small. */
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;

/**
 * The envd plane (DESIGN.md §14): E2B's in-sandbox API served by sbx for every sandbox, reached
 * under `/e2b/sandbox` with `E2b-Sandbox-Id` and `E2b-Sandbox-Port` (the SDK's `E2B_SANDBOX_URL`
 * mode; Host-routed `49983-<id>.<preview_domain>` requests arrive here the same way). Port 49983 is
 * envd — the Connect services `process.Process` and `filesystem.Filesystem`, `/files`, `/health`;
 * any other port is the sandbox's own, forwarded as a preview once the access token is checked.
 */
export function envdHandler(deps: EnvdDeps): (req: IncomingMessage, res: ServerResponse) => void {
  const resolve = (ctx: HandlerContext): Promise<EnvdTarget> =>
    resolveTarget(deps, ctx.requestHeader.get(SANDBOX_ID_HEADER), ctx.requestHeader.get(ACCESS_TOKEN_HEADER) ?? undefined).catch(
      (err: unknown) => {
        throw toConnectError(err);
      },
    );
  const rpc = connectNodeAdapter({
    routes: (router) => {
      router.service(Process, processService(deps, resolve));
      router.service(Filesystem, filesystemService(deps, resolve));
    },
    requestPathPrefix: ENVD_PREFIX,
    readMaxBytes: MAX_MESSAGE_BYTES,
    // Connect's JSON and binary codecs over HTTP/1.1 (the SDK uses JSON); no gRPC needed here.
    grpc: false,
    grpcWeb: false,
  });
  return (req, res) => {
    const id = headerOf(req, SANDBOX_ID_HEADER) ?? null;
    const portText = headerOf(req, SANDBOX_PORT_HEADER);
    const port = portText === undefined ? ENVD_PORT : Number(portText);
    const path = (req.url ?? '/').slice(ENVD_PREFIX.length) || '/';
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      return fail(req, res, new SbxError('bad_request', 'port must be between 1 and 65535'));
    if (port !== ENVD_PORT) return void forward(deps, req, res, id, port, path);
    const bare = path.split('?')[0];
    if (bare === '/health') return void health(deps, req, res, id);
    if (bare === '/files') return void serveFiles(deps, req, res, id);
    rpc(req, res);
  };
}

/**
 * An upgrade (a WebSocket) under `/e2b/sandbox`: to the sandbox's own port named by `E2b-Sandbox-Port`
 * once the access token is checked, spliced by the preview proxy; envd itself (49983) has none → 404.
 */
export function envdUpgradeHandler(deps: EnvdDeps): (req: IncomingMessage, socket: Socket, head: Buffer) => void {
  return (req, socket, head) => {
    const id = headerOf(req, SANDBOX_ID_HEADER) ?? null;
    const portText = headerOf(req, SANDBOX_PORT_HEADER);
    const port = portText === undefined ? ENVD_PORT : Number(portText);
    const path = (req.url ?? '/').slice(ENVD_PREFIX.length) || '/';
    const refuse = (err: unknown) => {
      const e = httpErrorOf(err);
      const text = JSON.stringify(e.body);
      socket.end(
        `HTTP/1.1 ${e.status} ${STATUS_CODES[e.status] ?? ''}\r\ncontent-type: application/json; charset=utf-8\r\n` +
          `content-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
      );
    };
    socket.on('error', () => socket.destroy());
    if (!Number.isInteger(port) || port < 1 || port > 65535) return refuse(new SbxError('bad_request', 'port must be between 1 and 65535'));
    if (port === ENVD_PORT) return refuse(new SbxError('not_found', 'envd serves no WebSocket: upgrades go to the sandbox’s own ports'));
    void resolveTarget(deps, id, headerOf(req, ACCESS_TOKEN_HEADER))
      .then((t) => {
        if (!deps.forwardUpgrade) throw new SbxError('not_implemented', 'ports other than envd (49983) are not forwarded by this server');
        deps.forwardUpgrade(req, socket, head, t.rec.id, port, path.startsWith('/') ? path : `/${path}`);
      }, refuse)
      .catch(refuse);
  };
}

/** `/health`: 204 while the sandbox lives, 502 (what E2B's proxy answers for a gone sandbox) otherwise. */
async function health(deps: EnvdDeps, req: IncomingMessage, res: ServerResponse, id: string | null): Promise<void> {
  try {
    if (!id) throw new SbxError('bad_request', 'the E2b-Sandbox-Id header is required');
    await deps.sandboxes.get(id, { owner_id: null, admin: true });
    res.writeHead(204).end();
  } catch (err) {
    const e = httpErrorOf(err);
    fail(req, res, e.status === 404 ? new SbxError('bad_gateway', `sandbox ${id} is not running`) : err);
  }
}

async function forward(deps: EnvdDeps, req: IncomingMessage, res: ServerResponse, id: string | null, port: number, path: string) {
  try {
    const t = await resolveTarget(deps, id, headerOf(req, ACCESS_TOKEN_HEADER));
    if (!deps.forwardPort) throw new SbxError('not_implemented', 'ports other than envd (49983) are not forwarded by this server');
    deps.forwardPort(req, res, t.rec.id, port, path.startsWith('/') ? path : `/${path}`);
  } catch (err) {
    fail(req, res, err);
  }
}

function fail(req: IncomingMessage, res: ServerResponse, err: unknown): void {
  req.resume();
  const e = httpErrorOf(err);
  if (res.headersSent) return void res.destroy();
  const text = JSON.stringify(e.body);
  res.writeHead(e.status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}
