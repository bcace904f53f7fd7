import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { STATUS_BY_CODE, type ErrorCode as WireErrorCode } from '../../contracts/errors.js';
import { isSbxError, type ErrorCode } from '../../core/errors.js';
import { allowedMethods, type RouteEntry } from './route-table.js';

/** The one mapping from the domain's codes to the wire's: the same list, checked here at compile time. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const CODES_MATCH: Same<ErrorCode, WireErrorCode> = true;
void CODES_MATCH;

/** HTTP status for each error code (spec Part 7, DESIGN.md §3); the table lives in contracts/errors.ts. */
export { STATUS_BY_CODE };

export function sendError(reply: FastifyReply, status: number, code: string, message: string, extra?: Record<string, unknown>) {
  return reply
    .code(status)
    .type('application/json; charset=utf-8')
    .send({ code, message, ...(extra ?? {}) });
}

/**
 * Error body everywhere: SbxError → its status; schema validation → 400; body parser problems →
 * 400/413; unknown route → 404; known path with another method → 405 with `Allow`.
 */
export function installErrorHandling(app: FastifyInstance, routes: readonly RouteEntry[]): void {
  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (isSbxError(err)) {
      const status = STATUS_BY_CODE[err.code] ?? 500;
      const { retry_after_s: retryAfter, ...details } = err.details ?? {};
      // A refusal that says when to come back (the in-flight budget) carries it as Retry-After.
      if (typeof retryAfter === 'number') reply.header('Retry-After', String(retryAfter));
      const extra = err.details ? sanitizeDetails(details) : undefined;
      // The error goes under `err` (pino's convention), so the line keeps one `msg`; the logger
      // writes an SbxError as {type, code, message}.
      if (status >= 500) request.log.warn({ err }, 'request failed');
      return sendError(reply, status, err.code, err.message, extra);
    }
    if (err.validation) {
      const where = err.validationContext ?? 'request';
      const first = err.validation[0];
      const field = first?.instancePath
        ? first.instancePath.replace(/^\//, '').replace(/\//g, '.')
        : (first?.params as { missingProperty?: string } | undefined)?.missingProperty;
      const extraProp = (first?.params as { additionalProperty?: string } | undefined)?.additionalProperty;
      const detail = extraProp ? `unknown field "${extraProp}"` : `${field ? `${field}: ` : ''}${first?.message ?? 'invalid'}`;
      return sendError(reply, 400, 'bad_request', `invalid ${where}: ${detail}`);
    }
    const code = (err as { code?: string }).code;
    if (err.statusCode === 413 || code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
      return sendError(reply, 413, 'payload_too_large', 'request body is larger than the server accepts');
    }
    if (code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      // Invalid input, so the spec's 400 bad_request (its error table has no 415).
      return sendError(
        reply,
        400,
        'bad_request',
        'unsupported content type: send application/json (file writes also take application/octet-stream)',
      );
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      const malformed = err instanceof SyntaxError || code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || /JSON/i.test(err.message);
      // Our own JSON parser already words its message; fastify's need the prefix.
      const message = malformed && !err.message.startsWith('malformed JSON body') ? `malformed JSON body: ${err.message}` : err.message;
      return sendError(reply, 400, 'bad_request', message);
    }
    request.log.error({ err }, 'unhandled error');
    return sendError(reply, 500, 'internal', 'internal server error');
  });

  app.setNotFoundHandler((request: FastifyRequest, reply: FastifyReply) => {
    const path = request.url.split('?')[0] ?? '/';
    const allowed = allowedMethods(routes, path);
    if (allowed.length > 0 && !allowed.includes(request.method)) {
      reply.header('Allow', allowed.join(', '));
      return sendError(
        reply,
        405,
        'method_not_allowed',
        `method ${request.method} is not allowed on ${path} (allowed: ${allowed.join(', ')})`,
      );
    }
    return sendError(reply, 404, 'not_found', `no route for ${request.method} ${path}`);
  });
}

/** Error details go to clients: keep plain data only. */
function sanitizeDetails(details: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(details)) {
    if (k === 'code' || k === 'message') continue;
    if (v === undefined || typeof v === 'function') continue;
    out[k] = v;
  }
  return out;
}
