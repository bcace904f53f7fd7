import { processRoutes } from './routes/processes.js';
import { runWithRequestId } from '../shared/request-context.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import websocket from '@fastify/websocket';
import { Ajv } from 'ajv';
import Fastify, {
  errorCodes,
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify';
import type { HttpDeps } from './deps.js';
import './schema-meta.js';
import { setDerivedOwnerKey } from './caller.js';
import { installErrorHandling, sendError } from './errors.js';
import { auditPlugin } from './plugins/audit.js';
import { authPlugin } from './plugins/auth.js';
import { corsPlugin } from './plugins/cors.js';
import { guardPlugin } from './plugins/guard.js';
import { rateLimitPlugin } from './plugins/rate-limit.js';
import { inflightPlugin } from './inflight.js';
import { adminRoutes } from './routes/admin.js';
import { execRoutes } from './routes/exec.js';
import { execWsRoutes } from './routes/exec-ws.js';
import { fileRoutes } from './routes/files.js';
import { fileWatchRoutes } from './routes/file-watch.js';
import { providerRoutes } from './routes/providers.js';
import { quotaRoutes } from './routes/quotas.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { sandboxExtensionRoutes } from './routes/sandbox-extensions.js';
import { systemRoutes } from './routes/system.js';
import { templateRoutes } from './routes/templates.js';
import { snapshotRoutes } from './routes/snapshots.js';
import { secretRoutes } from './routes/secrets.js';
import { workerSecretRoutes } from './routes/worker-secrets.js';
import { volumeRoutes } from './routes/volumes.js';
import { workerRoutes } from './routes/workers.js';
import { workerFacingRoutes } from './routes/worker-facing.js';
import { installHttpMetrics } from './metrics/prometheus.js';
import { eventRoutes } from './routes/events.js';
import { observabilityRoutes } from './routes/observability.js';
import { openapiRoutes } from './routes/openapi.js';
import { installRouteTable } from './route-table.js';
import { previewRouter } from './preview.js';

export interface BuildAppOptions {
  logger?: FastifyServerOptions['loggerInstance'] | boolean;
  /** Extra plugins that must see every route (auth, audit, rate limit…), registered before routes. */
  plugins?: Array<(app: FastifyInstance, deps: HttpDeps) => void | Promise<void>>;
  /** Extra route groups (admin, events, metrics…). */
  routes?: Array<(app: FastifyInstance, deps: HttpDeps) => void | Promise<void>>;
  /**
   * Secret the derived owners (`key/…`, `ip/…`) are keyed with. compose/ passes the installation's
   * stored one so owners stay stable across restarts; without it a random one is made per app.
   */
  derivedOwnerKey?: Buffer;
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const RAW_TYPE = 'application/octet-stream';

const rawBodyValidator = Object.assign((data: unknown): boolean => Buffer.isBuffer(data), {
  errors: [{ instancePath: '', schemaPath: '#', keyword: 'type', params: {}, message: 'must be raw bytes (application/octet-stream)' }],
});

/** Builds the HTTP API. Only `serve` calls listen; tests use a real port 0 or inject(). */
export async function buildApp(deps: HttpDeps, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  const logger = opts.logger ?? false;
  const app = Fastify({
    ...(typeof logger === 'object' ? { loggerInstance: logger } : { logger }),
    bodyLimit: deps.bodyLimit,
    // Owner ids may be 128 characters (spec 8); the default 100 would answer 414 for valid ones.
    routerOptions: { maxParamLength: 512 },
    // Request lines come from our own hooks (audit, metrics); fastify's own per-request lines are off.
    logController: new LogController({ disableRequestLogging: true }),
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    clientErrorHandler: answerClientError,
    frameworkErrors: answerRoutingError,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      const id = Array.isArray(given) ? given[0] : given;
      return id && SAFE_REQUEST_ID.test(id) ? id : randomUUID();
    },
  });

  // Query strings and params are text and need coercion ('5' → 5); JSON bodies are typed and must
  // not be coerced (metadata {a: 1} is an error, not "1"). A missing body validates as {}.
  const textAjv = new Ajv({ coerceTypes: 'array', useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  const bodyAjv = new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: false, strict: false });
  // Shared schemas (same object or same $id on several routes) compile once per instance.
  const compile = (ajv: Ajv, schema: Record<string, unknown>) => {
    const id = typeof schema.$id === 'string' ? schema.$id : undefined;
    return (id && ajv.getSchema(id)) || ajv.compile(schema);
  };
  app.setValidatorCompiler(({ schema, httpPart, contentType }) => {
    // A raw body (RawBytes, per-content-type body schemas) is bytes from the octet-stream parser
    // below; there is nothing for Ajv to check.
    if (httpPart === 'body' && contentType === RAW_TYPE) return rawBodyValidator;
    const validate = compile(httpPart === 'body' ? bodyAjv : textAjv, schema as Record<string, unknown>);
    if (httpPart !== 'body') return validate;
    // Schemas here are never async, so the result is a plain boolean.
    const withEmpty = (data: unknown): boolean => validate(data === undefined || data === null ? {} : data) as boolean;
    Object.defineProperty(withEmpty, 'errors', { get: () => validate.errors });
    return withEmpty;
  });
  app.addHook('preValidation', async (request) => {
    const writes = request.method === 'POST' || request.method === 'PUT' || request.method === 'PATCH';
    if (writes && (request.body === undefined || request.body === null)) (request as { body: unknown }).body = {};
  });

  // Previews (DESIGN §9) are routed by Host before fastify sees the request: no API hook, route
  // or credential applies to them, and API credentials never reach a sandbox.
  if (deps.preview) previewRouter(deps).attach(app.server);

  setDerivedOwnerKey(app, opts.derivedOwnerKey ?? randomBytes(32));
  // Before any route: the one route table (auth matrix, OpenAPI, 404/405) must see them all, and
  // so must the per-route request histogram.
  const routeTable = installRouteTable(app);
  installErrorHandling(app, routeTable);
  installHttpMetrics(app, deps, routeTable);

  // An empty JSON body is "no body" (a spawn with server defaults), not a parse error.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = new Error(`malformed JSON body: ${(err as Error).message}`) as Error & { statusCode: number };
      e.statusCode = 400;
      done(e, undefined);
    }
  });

  // Raw bytes (sbx extension), within the same body limit, only for routes that declare an
  // application/octet-stream body (the raw file write); anywhere else the type stays unsupported.
  app.addContentTypeParser(RAW_TYPE, { parseAs: 'buffer', bodyLimit: deps.bodyLimit }, (req, body, done) => {
    // Unknown route or method: the not-found handler answers 404/405 as for any other type.
    if (req.is404) return done(null, undefined);
    const content = (req.routeOptions.schema?.body as { content?: Record<string, unknown> } | undefined)?.content;
    if (!content || !(RAW_TYPE in content)) return done(new errorCodes.FST_ERR_CTP_INVALID_MEDIA_TYPE(), undefined);
    done(null, body);
  });

  // WebSocket upgrades go through the same router and hooks (auth, rate limit) as any request;
  // frames are bounded like request bodies. Registered before every other onRequest hook: its
  // own hook marks upgrade requests, so a refusal by a later hook (401, 429) answers over HTTP
  // and then closes the socket instead of leaving it open.
  await app.register(websocket, { options: { maxPayload: deps.bodyLimit } });
  // The rest of the request (hooks, handler, the work it starts) runs as this request id, so calls
  // to workers carry it (`X-Request-ID`, spec 5.2).
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('X-Request-ID', request.id);
    runWithRequestId(request.id, done);
  });

  // While auth is off the dev-box guard refuses foreign origins and Host names first (DESIGN §3);
  // CORS answers preflights before auth looks at credentials; audit records admin requests.
  guardPlugin(app, deps);
  corsPlugin(app, deps);
  authPlugin(app, deps);
  auditPlugin(app, deps);
  // After auth: a request with a bad key is refused before it costs a token.
  rateLimitPlugin(app, deps);
  // After auth and rate limit, before any body is read: request bodies against the in-flight budget.
  inflightPlugin(app, deps);
  for (const plugin of opts.plugins ?? []) await plugin(app, deps);

  systemRoutes(app, deps);
  sandboxRoutes(app, deps);
  sandboxExtensionRoutes(app, deps);
  execRoutes(app, deps);
  execWsRoutes(app, deps);
  processRoutes(app, deps);
  fileRoutes(app, deps);
  fileWatchRoutes(app, deps);
  templateRoutes(app, deps);
  snapshotRoutes(app, deps);
  volumeRoutes(app, deps);
  secretRoutes(app, deps);
  quotaRoutes(app, deps);
  providerRoutes(app, deps);
  workerRoutes(app, deps);
  eventRoutes(app, deps);
  observabilityRoutes(app, deps);
  openapiRoutes(app, deps, routeTable);
  workerFacingRoutes(app, deps);
  workerSecretRoutes(app, deps);
  adminRoutes(app, deps);
  for (const group of opts.routes ?? []) await group(app, deps);

  return app;
}

/**
 * Paths the router cannot read (bad percent-encoding, a segment over maxParamLength) are refused
 * before any hook runs; they still get `{code, message}`. Both are invalid input, so 400 (an
 * over-long owner id in a quota path is an invalid owner id, spec 4.4). The path is not echoed.
 */
function answerRoutingError(err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Request-ID', request.id);
  if (err.code === 'FST_ERR_BAD_URL')
    return void sendError(reply, 400, 'bad_request', 'malformed URL: invalid percent-encoding in the path');
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
    return void sendError(reply, 400, 'bad_request', 'a path segment is longer than the server accepts');
  request.log.error({ code: err.code }, 'routing failed');
  void sendError(reply, 500, 'internal', 'internal server error');
}

/**
 * Requests Node's HTTP parser refuses (a control byte in a header, a malformed request line,
 * headers over the size limit) never reach fastify's router, so its error handler cannot answer
 * them; they still get the `{code, message}` body (spec Part 7) and the connection is closed,
 * since the parser cannot tell where the next request would start. The raw packet is never logged:
 * it holds the request's credentials.
 */
function answerClientError(this: FastifyInstance, err: Error & { code?: string }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? // The request line (a long path or query) or the headers: an oversized request is
        // 413 payload_too_large, the one pair DESIGN.md §3 has for it.
        [413, 'payload_too_large', 'request line or headers are larger than the server accepts']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'timeout', 'the request was not received in time']
        : [400, 'bad_request', `malformed HTTP request (${parserProblem(err.code)})`];
  this.log.debug({ code: err.code, status }, 'client error');
  if (socket.writable) {
    const body = JSON.stringify({ code, message });
    socket.end(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; ` +
        `charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroySoon();
}

/** A short description of an llhttp error code for the client; never request bytes. */
function parserProblem(code: string | undefined): string {
  switch (code) {
    case 'HPE_INVALID_HEADER_TOKEN':
      return 'invalid character in a header name or value';
    case 'HPE_INVALID_METHOD':
      return 'invalid method';
    case 'HPE_INVALID_URL':
      return 'invalid request target';
    case 'HPE_INVALID_VERSION':
      return 'invalid HTTP version';
    case 'HPE_INVALID_CONTENT_LENGTH':
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
      return 'invalid Content-Length';
    case 'HPE_INVALID_TRANSFER_ENCODING':
    case 'HPE_INVALID_CHUNK_SIZE':
      return 'invalid chunked encoding';
    default:
      return code ? code.replace(/^HPE_/, '').toLowerCase().replace(/_/g, ' ') : 'unreadable request';
  }
}
