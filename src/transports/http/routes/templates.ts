import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import { Sandbox } from '../../../contracts/sandboxes.js';
import {
  CreateTemplateRequest,
  Template,
  TemplateSpawnRequest,
  UpdateTemplateRequest,
  type CreateTemplateRequest as CreateBody,
  type TemplateSpawnRequest as SpawnBody,
  type UpdateTemplateRequest as UpdateBody,
} from '../../../contracts/templates.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';
import { IdempotencyHeaders, spawnReply } from '../idempotent.js';
import { presentTemplate } from '../presenters.js';

const NameParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 409: ErrorBody, 429: ErrorBody, 500: ErrorBody, 503: ErrorBody };
type N = { Params: { name: string } };

/** Spec 4.3. */
export function templateRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['templates'];

  app.post<{ Body: CreateBody }>(
    '/api/v1/templates',
    { schema: { tags, summary: 'Create a template', body: CreateTemplateRequest, response: { 201: Template, ...errors } } },
    async (request, reply) => {
      const { name, ...fields } = request.body;
      return reply.code(201).send(presentTemplate(await deps.templates.create(name, fields)));
    },
  );

  app.get(
    '/api/v1/templates',
    { schema: { tags, summary: 'List templates', response: { 200: Type.Array(Template), ...errors } } },
    async () => (await deps.templates.list()).map(presentTemplate),
  );

  app.get<N>(
    '/api/v1/templates/:name',
    { schema: { tags, summary: 'Get a template', params: NameParams, response: { 200: Template, ...errors } } },
    async (request) => presentTemplate(await deps.templates.get(request.params.name)),
  );

  app.put<N & { Body: UpdateBody }>(
    '/api/v1/templates/:name',
    {
      schema: {
        tags,
        summary: 'Replace a template',
        params: NameParams,
        body: UpdateTemplateRequest,
        response: { 200: Template, ...errors },
      },
    },
    async (request) => presentTemplate(await deps.templates.update(request.params.name, request.body)),
  );

  app.delete<N>(
    '/api/v1/templates/:name',
    { schema: { tags, summary: 'Delete a template', params: NameParams, response: { 200: StatusBody('deleted'), ...errors } } },
    async (request) => {
      await deps.templates.remove(request.params.name);
      return { status: 'deleted' as const };
    },
  );

  app.post<N & { Body: SpawnBody | undefined }>(
    '/api/v1/templates/:name/spawn',
    {
      schema: {
        tags,
        summary: 'Spawn from a template',
        params: NameParams,
        headers: IdempotencyHeaders,
        body: TemplateSpawnRequest,
        response: { 201: Sandbox, ...errors, 409: ErrorBody },
      },
    },
    async (request, reply) => {
      const body = request.body ?? {};
      const caller = callerOf(request, body.owner_id);
      const { name } = request.params;
      return spawnReply(request, reply, deps, caller, `template:${name}`, (signal) =>
        deps.templates.spawn(name, { ...body, owner_id: caller.owner_id }, signal),
      );
    },
  );
}
