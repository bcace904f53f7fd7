import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import {
  CreateSecretRequest,
  Secret,
  SecretOwnerQuery,
  UpdateSecretRequest,
  type CreateSecretRequest as CreateBody,
  type SecretOwnerQuery as OwnerQuery,
  type UpdateSecretRequest as UpdateBody,
} from '../../../contracts/secrets.js';
import { SbxError } from '../../../core/errors.js';
import type { SecretService } from '../../../core/secrets/service.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';

const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 501: ErrorBody, 503: ErrorBody };
const NameParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 256 }) });

/**
 * DESIGN.md §15: secrets, owner-scoped (the X-User-ID owner; admins address another's with
 * `?owner_id=`). A value goes in and never comes out: answers show its fingerprint only.
 */
export function secretRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const tags = ['secrets'];
  const secrets = (): SecretService => {
    if (!deps.secretService) throw new SbxError('not_implemented', 'secrets are not available on this server');
    return deps.secretService;
  };

  app.post<{ Body: CreateBody; Querystring: OwnerQuery }>(
    '/api/v1/secrets',
    {
      schema: {
        tags,
        summary: 'Create a secret; its value is stored encrypted and never answered (sbx extension)',
        querystring: SecretOwnerQuery,
        body: CreateSecretRequest,
        response: { 201: Secret, ...errors },
      },
    },
    async (request, reply) => reply.code(201).send(await secrets().create(callerOf(request), request.body, request.query.owner_id)),
  );

  app.get<{ Querystring: OwnerQuery }>(
    '/api/v1/secrets',
    {
      schema: {
        tags,
        summary: "The caller's secrets by name; admins: every owner's, or one owner's with ?owner_id= (sbx extension)",
        querystring: SecretOwnerQuery,
        response: { 200: Type.Array(Secret), ...errors },
      },
    },
    async (request) => secrets().list(callerOf(request), request.query.owner_id),
  );

  app.get<{ Params: { name: string }; Querystring: OwnerQuery }>(
    '/api/v1/secrets/:name',
    {
      schema: {
        tags,
        summary: 'One secret, without its value (sbx extension)',
        params: NameParams,
        querystring: SecretOwnerQuery,
        response: { 200: Secret, ...errors },
      },
    },
    async (request) => secrets().get(callerOf(request), request.params.name, request.query.owner_id),
  );

  app.put<{ Params: { name: string }; Body: UpdateBody; Querystring: OwnerQuery }>(
    '/api/v1/secrets/:name',
    {
      schema: {
        tags,
        summary: "Change a secret's value, hosts or allow_plain_http; applies to the next request (sbx extension)",
        params: NameParams,
        querystring: SecretOwnerQuery,
        body: UpdateSecretRequest,
        response: { 200: Secret, ...errors },
      },
    },
    async (request) => secrets().update(callerOf(request), request.params.name, request.body, request.query.owner_id),
  );

  app.delete<{ Params: { name: string }; Querystring: OwnerQuery }>(
    '/api/v1/secrets/:name',
    {
      schema: {
        tags,
        summary: 'Delete a secret: sandboxes bound to it stop getting its value (sbx extension)',
        params: NameParams,
        querystring: SecretOwnerQuery,
        response: { 200: StatusBody('deleted'), ...errors },
      },
    },
    async (request) => {
      await secrets().remove(callerOf(request), request.params.name, request.query.owner_id);
      return { status: 'deleted' as const };
    },
  );
}
