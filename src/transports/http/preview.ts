/**
 * The control plane's preview router (DESIGN.md §9): host-routed previews under
 * `server.preview_domain`, the token rule of `server.preview_auth`, upstreams from core's
 * PreviewService. Shared by the API listener and the optional `server.preview_addr` listener.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';
import { PreviewRouter } from '../shared/preview/router.js';
import { sendPreviewError, writeRawError } from '../shared/preview/proxy.js';
import type { HttpDeps } from './deps.js';
import { ENVD_PORT, ENVD_PREFIX, SANDBOX_ID_HEADER, SANDBOX_PORT_HEADER } from '../shared/envd-routing.js';

const routers = new WeakMap<HttpDeps, PreviewRouter>();

/** The one router of this control plane (made on first use). */
export function previewRouter(deps: HttpDeps): PreviewRouter {
  let r = routers.get(deps);
  if (r) return r;
  const preview = deps.preview!;
  const service = preview.service;
  const secrets = (deps.secrets ?? []).filter((s) => s.length >= 8);
  r = new PreviewRouter({
    domain: service.settings.domain,
    resolve: (id, port) => service.upstream(id, port),
    token: { required: service.settings.auth, matches: (id, given) => service.tokenMatches(id, given) },
    isApiCredential: (value) => secrets.some((s) => value.includes(s)),
    stats: preview.stats,
    // E2B's envd port on a preview host is the envd plane of the API (DESIGN.md §14), behind its own token check.
    ...(deps.e2b !== false ? { divert: divertEnvd } : {}),
  });
  routers.set(deps, r);
  return r;
}

/** `49983-<id>.<domain>` → `/e2b/sandbox/…` with E2B's sandbox headers, served by the API's envd route. */
function divertEnvd(req: IncomingMessage, sandboxId: string, port: number): boolean {
  if (port !== ENVD_PORT) return false;
  req.url = `${ENVD_PREFIX}${(req.url ?? '/').startsWith('/') ? '' : '/'}${req.url ?? '/'}`;
  req.headers[SANDBOX_ID_HEADER] = sandboxId;
  req.headers[SANDBOX_PORT_HEADER] = String(port);
  return true;
}

/** `server.preview_addr`: a listener of previews alone; any other Host gets 404. */
export function previewOnlyServer(deps: HttpDeps): Server {
  const router = previewRouter(deps);
  const notPreview = 'this listener serves previews only: <port>-<sandbox_id>.<preview_domain>';
  const server = createServer((_req, res) => sendPreviewError(res, 404, 'not_found', notPreview));
  server.on('upgrade', (_req, socket) => writeRawError(socket as Socket, 404, 'not_found', notPreview));
  router.attach(server);
  return server;
}
