import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { HttpDeps } from './deps.js';
import './schema-meta.js';
import { installErrorHandling } from './errors.js';
import { execRoutes } from './routes/exec.js';
import { fileRoutes } from './routes/files.js';
import { providerRoutes } from './routes/providers.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { systemRoutes } from './routes/system.js';
import { templateRoutes } from './routes/templates.js';
import { workerRoutes } from './routes/workers.js';

export interface BuildAppOptions {
  logger?: FastifyServerOptions['loggerInstance'] | boolean;
  /** Extra plugins that must see every route (auth, audit, rate limit…), registered before routes. */
  plugins?: Array<(app: FastifyInstance, deps: HttpDeps) => void | Promise<void>>;
  /** Extra route groups (admin, events, metrics…). */
  routes?: Array<(app: FastifyInstance, deps: HttpDeps) => void | Promise<void>>;
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Builds the HTTP API. Only `serve` calls listen; tests use a real port 0 or inject(). */
export async function buildApp(deps: HttpDeps, opts: BuildAppOptions = {}): Promise<FastifyInstance> {
  const logger = opts.logger ?? false;
  const app = Fastify({
    ...(typeof logger === 'object' ? { loggerInstance: logger } : { logger }),
    bodyLimit: deps.bodyLimit,
    disableRequestLogging: true,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      const id = Array.isArray(given) ? given[0] : given;
      return id && SAFE_REQUEST_ID.test(id) ? id : randomUUID();
    },
    ajv: { customOptions: { removeAdditional: false, coerceTypes: 'array', useDefaults: true, allErrors: false } },
  });

  installErrorHandling(app);

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

  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-ID', request.id);
  });

  for (const plugin of opts.plugins ?? []) await plugin(app, deps);

  systemRoutes(app, deps);
  sandboxRoutes(app, deps);
  execRoutes(app, deps);
  fileRoutes(app, deps);
  templateRoutes(app, deps);
  providerRoutes(app, deps);
  workerRoutes(app, deps);
  for (const group of opts.routes ?? []) await group(app, deps);

  return app;
}
