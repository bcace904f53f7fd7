import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { AUDIT_CSV_COLUMNS, AuditQuery, AuditRecord, WorkerDeleted, type AuditQuery as AuditQueryT } from '../../../contracts/admin.js';
import { ErrorBody } from '../../../contracts/common.js';
import { HeartbeatRequest, Worker, type HeartbeatRequest as HeartbeatBody } from '../../../contracts/system.js';
import type { AuditRecord as AuditRow } from '../../../core/ports/index.js';
import { STALE_AFTER_MS } from '../../../core/scheduler/workers.js';
import type { HttpDeps } from '../deps.js';
import { presentWorker } from '../presenters.js';
import { observabilityRoutes } from './observability.js';
import { providerRoutes } from './providers.js';

const WorkerParams = Type.Object({ workerID: Type.String({ minLength: 1, maxLength: 128 }) });
const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody };

/**
 * Admin aliases (spec 4.9) and admin-only routes: provider and observability aliases, worker registry repair, audit
 * history. The auth plugin guards the whole `/api/v1/admin/` prefix; quota aliases live with quotas.
 */
export function adminRoutes(app: FastifyInstance, deps: HttpDeps): void {
  providerRoutes(app, deps, '/admin');
  observabilityRoutes(app, deps, '/admin');
  const tags = ['admin'];
  const present = (w: Parameters<typeof presentWorker>[0]) => presentWorker(w, STALE_AFTER_MS, deps.clock.now());

  app.post<{ Params: { workerID: string }; Body: HeartbeatBody }>(
    '/api/v1/admin/workers/:workerID/heartbeat',
    {
      schema: {
        tags,
        summary: 'Record a heartbeat for a worker (registry repair, test setup)',
        params: WorkerParams,
        body: HeartbeatRequest,
        response: { 200: Worker, ...errors },
      },
    },
    async (request) => present(await deps.workers.heartbeat(request.params.workerID, request.body)),
  );

  app.delete<{ Params: { workerID: string } }>(
    '/api/v1/admin/workers/:workerID',
    { schema: { tags, summary: 'Remove a worker from the registry', params: WorkerParams, response: { 200: WorkerDeleted, ...errors } } },
    async (request) => {
      await deps.workers.remove(request.params.workerID);
      return { status: 'deleted' as const };
    },
  );

  app.post<{ Params: { workerID: string } }>(
    '/api/v1/admin/workers/:workerID/drain',
    {
      schema: {
        tags,
        summary: 'Drain a worker: it refuses new spawns, its running sandboxes keep answering',
        params: WorkerParams,
        response: { 200: Worker, ...errors, 409: ErrorBody, 503: ErrorBody },
      },
    },
    async (request) => present(await deps.workers.drain(request.params.workerID)),
  );

  app.get<{ Querystring: AuditQueryT }>(
    '/api/v1/admin/audit',
    {
      schema: {
        tags,
        summary: 'Admin audit history, newest first; format=csv for CSV',
        querystring: AuditQuery,
        response: {
          200: {
            description: 'Audit records, newest first: JSON, or with format=csv a CSV file (header row, columns in record order)',
            content: { 'application/json': { schema: Type.Array(AuditRecord) }, 'text/csv': { schema: Type.String() } },
          },
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const { format, ...filter } = request.query;
      const rows = await deps.audit.list(filter);
      if (format !== 'csv') return rows;
      return reply
        .type('text/csv; charset=utf-8')
        .header('Content-Disposition', 'attachment; filename="sbx-audit.csv"')
        .send(auditCsv(rows));
    },
  );
}

/** RFC 4180 CSV with a header row; cells that a spreadsheet would run as formulas are defused. */
export function auditCsv(rows: AuditRow[]): string {
  const lines = [AUDIT_CSV_COLUMNS.join(',')];
  for (const r of rows) lines.push(AUDIT_CSV_COLUMNS.map((c) => csvCell(r[c])).join(','));
  return `${lines.join('\r\n')}\r\n`;
}

function csvCell(value: string | number): string {
  if (typeof value === 'number') return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) || text !== text.trim() ? `"${text.replace(/"/g, '""')}"` : text;
}
