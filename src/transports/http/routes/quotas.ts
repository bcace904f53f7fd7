import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import { OwnerQuota, OwnerUsage, QuotaInput, QuotaSummary, type QuotaInput as QuotaBody } from '../../../contracts/quotas.js';
import type { HttpDeps } from '../deps.js';

const OwnerParams = Type.Object({ ownerID: Type.String({ minLength: 1, maxLength: 512 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 500: ErrorBody };
type O = { Params: { ownerID: string } };

/**
 * Owner quotas (spec 4.4) on `/api/v1/quotas…` and the admin aliases `/api/v1/admin/quotas…` (spec 4.9).
 * Saves and deletes on both are recorded by the audit plugin.
 */
export function quotaRoutes(app: FastifyInstance, deps: HttpDeps): void {
  for (const prefix of ['', '/admin']) {
    const base = `/api/v1${prefix}/quotas`;
    const tags = [prefix ? 'admin' : 'quotas'];
    const alias = prefix ? ' (admin alias)' : '';

    app.get(
      base,
      { schema: { tags, summary: `List owner quotas${alias}`, response: { 200: Type.Array(OwnerQuota), ...errors } } },
      async () => deps.quotas.list(),
    );

    app.get(
      `${base}/summary`,
      { schema: { tags, summary: `Quota summary (no owner ids)${alias}`, response: { 200: QuotaSummary, ...errors } } },
      async () => deps.quotas.summary(),
    );

    app.get<O>(
      `${base}/:ownerID`,
      { schema: { tags, summary: `Get an owner quota${alias}`, params: OwnerParams, response: { 200: OwnerQuota, ...errors } } },
      async (request) => deps.quotas.get(request.params.ownerID),
    );

    app.put<O & { Body: QuotaBody | undefined }>(
      `${base}/:ownerID`,
      {
        schema: {
          tags,
          summary: `Save (upsert) an owner quota${alias}`,
          params: OwnerParams,
          body: Type.Optional(QuotaInput),
          response: { 200: OwnerQuota, ...errors },
        },
      },
      async (request) => deps.quotas.save(request.params.ownerID, request.body ?? {}),
    );

    app.get<O>(
      `${base}/:ownerID/usage`,
      {
        schema: {
          tags,
          summary: `Owner usage with effective limits${alias}`,
          params: OwnerParams,
          response: { 200: OwnerUsage, ...errors },
        },
      },
      async (request) => deps.quotas.usage(request.params.ownerID),
    );

    app.delete<O>(
      `${base}/:ownerID`,
      {
        schema: {
          tags,
          summary: `Delete an owner quota${alias}`,
          params: OwnerParams,
          response: { 200: StatusBody('deleted'), ...errors },
        },
      },
      async (request) => {
        await deps.quotas.remove(request.params.ownerID);
        return { status: 'deleted' as const };
      },
    );
  }
}
