import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import {
  AdmissionDecision,
  DestroyResponse,
  ExtendRequest,
  ListSandboxesQuery,
  LOG_CURSOR_HEADER,
  LogsQuery,
  PruneResponse,
  Sandbox,
  SpawnRequest,
  type SpawnRequest as SpawnBody,
} from '../../../contracts/sandboxes.js';
import { decodeCursor, encodeCursor } from '../../../core/sandboxes/cursor.js';
import { badRequest } from '../../../core/errors.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { presentOne, presentSandboxes } from '../presenters.js';
import { IdempotencyHeaders, spawnReply } from '../idempotent.js';

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 128 }) });
export const errors = { 400: ErrorBody, 404: ErrorBody, 429: ErrorBody, 500: ErrorBody, 503: ErrorBody };

/** Spec 4.1: lifecycle routes and console logs. */
export function sandboxRoutes(app: FastifyInstance, deps: HttpDeps): void {
  app.post<{ Body: SpawnBody | undefined }>(
    '/api/v1/sandboxes',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Spawn a sandbox',
        headers: IdempotencyHeaders,
        body: SpawnRequest,
        response: { 201: Sandbox, ...errors, 409: ErrorBody },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const caller = callerOf(request, body.owner_id);
      return spawnReply(request, reply, deps, caller, 'spawn', (signal) =>
        deps.sandboxes.spawn({ ...body, owner_id: caller.owner_id }, signal),
      );
    },
  );

  app.post<{ Body: SpawnBody | undefined }>(
    '/api/v1/sandboxes/admission',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Spawn admission preflight; creates nothing',
        body: SpawnRequest,
        response: { 200: AdmissionDecision, ...errors },
      },
    },
    async (request) => {
      const body = request.body ?? {};
      const caller = callerOf(request, body.owner_id);
      const req = await deps.sandboxes.resolveSpawn({ ...body, owner_id: caller.owner_id });
      return deps.admission.decide({ owner_id: req.owner_id, ttl_ms: req.ttl_ms });
    },
  );

  app.get<{ Querystring: ListSandboxesQuery }>(
    '/api/v1/sandboxes',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'List live sandboxes',
        description: 'Oldest first (created_at, then id). sbx extensions: `id_prefix` and `limit`; without `limit` the whole array.',
        querystring: ListSandboxesQuery,
        response: { 200: Type.Array(Sandbox), ...errors },
      },
    },
    async (request, reply) => {
      const { id_prefix, limit, after } = request.query;
      if (after !== undefined && limit === undefined)
        throw badRequest('after needs limit: pass the limit of the page along with the cursor');
      const caller = callerOf(request);
      const position = after !== undefined ? decodeCursor(deps.listCursorSecret, after) : undefined;
      const page = await deps.sandboxes.page(caller, { id_prefix, limit, after: position });
      if (page.next && limit !== undefined) {
        const q = new URLSearchParams({ limit: String(limit), after: encodeCursor(deps.listCursorSecret, page.next) });
        if (id_prefix) q.set('id_prefix', id_prefix);
        reply.header('Link', `</api/v1/sandboxes?${q.toString()}>; rel="next"`);
      }
      return presentSandboxes(deps, caller, page.items);
    },
  );

  app.get<{ Params: { id: string } }>(
    '/api/v1/sandboxes/:id',
    { schema: { tags: ['sandboxes'], summary: 'Get a sandbox', params: IdParams, response: { 200: Sandbox, ...errors } } },
    async (request) => {
      const caller = callerOf(request);
      return presentOne(deps, caller, await deps.sandboxes.refresh(request.params.id, caller));
    },
  );

  app.delete<{ Params: { id: string } }>(
    '/api/v1/sandboxes/:id',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Destroy a sandbox (idempotent)',
        params: IdParams,
        response: { 200: DestroyResponse, ...errors },
      },
    },
    async (request) => {
      await deps.sandboxes.destroy(request.params.id, callerOf(request));
      return { status: 'destroyed' as const };
    },
  );

  app.delete(
    '/api/v1/sandboxes',
    { schema: { tags: ['sandboxes'], summary: 'Prune expired sandboxes', response: { 200: PruneResponse, ...errors } } },
    async (request) => ({ pruned: await deps.sandboxes.prune(callerOf(request)) }),
  );

  app.post<{ Params: { id: string }; Body: { ttl: string } }>(
    '/api/v1/sandboxes/:id/extend',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Extend the TTL (expires_at = now + ttl)',
        params: IdParams,
        body: ExtendRequest,
        response: { 200: Sandbox, ...errors },
      },
    },
    async (request) => {
      const caller = callerOf(request);
      return presentOne(deps, caller, await deps.sandboxes.extend(request.params.id, request.body.ttl, caller));
    },
  );

  app.get<{ Params: { id: string }; Querystring: { lines?: number; after?: number } }>(
    '/api/v1/sandboxes/:id/logs',
    {
      schema: {
        tags: ['sandboxes'],
        summary: 'Console log lines',
        description:
          `The body is the spec's array of lines. sbx extension: the ${LOG_CURSOR_HEADER} header ` +
          `carries the number of the last line returned; pass it back as \`after\` to get only newer lines.`,
        params: IdParams,
        querystring: LogsQuery,
        response: { 200: Type.Array(Type.String()), ...errors },
      },
    },
    async (request, reply) => {
      const { lines, after } = request.query;
      const log = await deps.files.logs(request.params.id, { lines: lines ?? 100, after }, callerOf(request));
      if (log.cursor !== undefined) reply.header(LOG_CURSOR_HEADER, String(log.cursor));
      return log.lines;
    },
  );
}
