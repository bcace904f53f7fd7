import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AuditContext } from '../../../core/admission/quotas.js';
import { realmOf } from '../../../core/auth/realm.js';
import { ErrorBody, StatusBody } from '../../../contracts/common.js';
import { OwnerQuota, OwnerUsage, QuotaInput, QuotaSummary, type QuotaInput as QuotaBody } from '../../../contracts/quotas.js';
import type { HttpDeps } from '../deps.js';

const OwnerParams = Type.Object({ ownerID: Type.String({ minLength: 1, maxLength: 512 }) });
const errors = { 400: ErrorBody, 404: ErrorBody, 500: ErrorBody };
type O = { Params: { ownerID: string } };

/**
 * The audit context of a change made through the compatibility paths. Admin-alias requests are
 * already recorded (allowed or refused) by the audit plugin, so they are not recorded twice.
 * The actor is the credential kind and X-User-ID the auth plugin resolved, never a key.
 */
function auditOf(request: FastifyRequest, startedMs: number): AuditContext | undefined {
  const path = request.url.split('?')[0] ?? '/';
  if (realmOf(path) === 'admin') return undefined;
  const ua = request.headers['user-agent'];
  return {
    actor: request.sbxActor || 'anonymous',
    method: request.method,
    path,
    status: 200,
    started_ms: startedMs,
    request_id: String(request.id),
    remote_addr: request.ip ?? '',
    user_agent: (Array.isArray(ua) ? ua[0] : ua) ?? '',
  };
}

/** Owner quotas (spec 4.4) on `/api/v1/quotas…` and the admin aliases `/api/v1/admin/quotas…` (spec 4.9). */
export function quotaRoutes(app: FastifyInstance, deps: HttpDeps): void {
  for (const prefix of ['', '/admin']) {
    const base = `/api/v1${prefix}/quotas`;
    const tags = [prefix ? 'admin' : 'quotas'];
    const alias = prefix ? ' (admin alias)' : '';

    app.get(base, { schema: { tags, summary: `List owner quotas${alias}`, response: { 200: Type.Array(OwnerQuota), ...errors } } }, async () => deps.quotas.list());

    app.get(`${base}/summary`, { schema: { tags, summary: `Quota summary (no owner ids)${alias}`, response: { 200: QuotaSummary, ...errors } } }, async () =>
      deps.quotas.summary(),
    );

    app.get<O>(`${base}/:ownerID`, { schema: { tags, summary: `Get an owner quota${alias}`, params: OwnerParams, response: { 200: OwnerQuota, ...errors } } }, async (request) =>
      deps.quotas.get(request.params.ownerID),
    );

    app.put<O & { Body: QuotaBody | undefined }>(
      `${base}/:ownerID`,
      { schema: { tags, summary: `Save (upsert) an owner quota${alias}`, params: OwnerParams, body: Type.Optional(QuotaInput), response: { 200: OwnerQuota, ...errors } } },
      async (request, reply) => {
        const started = Date.now() - reply.elapsedTime;
        return deps.quotas.save(request.params.ownerID, request.body ?? {}, auditOf(request, started));
      },
    );

    app.get<O>(
      `${base}/:ownerID/usage`,
      { schema: { tags, summary: `Owner usage with effective limits${alias}`, params: OwnerParams, response: { 200: OwnerUsage, ...errors } } },
      async (request) => deps.quotas.usage(request.params.ownerID),
    );

    app.delete<O>(
      `${base}/:ownerID`,
      { schema: { tags, summary: `Delete an owner quota${alias}`, params: OwnerParams, response: { 200: StatusBody('deleted'), ...errors } } },
      async (request, reply) => {
        const started = Date.now() - reply.elapsedTime;
        await deps.quotas.remove(request.params.ownerID, auditOf(request, started));
        return { status: 'deleted' as const };
      },
    );
  }
}
