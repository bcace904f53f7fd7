import { type Static } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Health, PoolStatus, Readiness } from '../../../contracts/system.js';
import { formatDuration } from '../../../shared/duration.js';
import { callerOf } from '../caller.js';
import type { HttpDeps } from '../deps.js';

/** Health, liveness, readiness (spec 2.14, 4.8), pool (4.7; snapshots are routes/snapshots.ts). */
export function systemRoutes(app: FastifyInstance, deps: HttpDeps): void {
  const base = () => ({ version: deps.settings.version, uptime: formatDuration(Math.floor((Date.now() - deps.startedAt) / 1000) * 1000) });

  app.get(
    '/api/v1/health',
    { schema: { tags: ['system'], summary: 'Health with dependency summary', response: { 200: Health } } },
    async () => {
      const providers = await deps.locator.providerStatuses();
      const health = await deps.storeProbe.check();
      const store = { healthy: health.healthy, latency_ms: Math.round(health.latency_ms) };
      return {
        status: 'ok',
        ...base(),
        store,
        providers: {
          total: providers.length,
          healthy: providers.filter((p) => p.healthy).length,
          default: deps.providers.defaultProviderName,
        },
      };
    },
  );

  app.get('/api/v1/live', { schema: { tags: ['system'], summary: 'Liveness', response: { 200: Health } } }, async () => ({
    status: 'alive',
    ...base(),
  }));

  app.get(
    '/api/v1/ready',
    {
      schema: {
        tags: ['system'],
        summary: 'Readiness; 503 when no provider is healthy or the database does not answer',
        response: { 200: Readiness, 503: Readiness },
      },
    },
    async (_req, reply) => {
      // A replica that lost its database is not ready, so a load balancer sends requests elsewhere.
      const store = await deps.storeProbe.check();
      const providers = store.healthy ? await deps.locator.providerStatuses() : [];
      const ready = providers.filter((p) => p.healthy).length;
      const body = {
        status: store.healthy && ready > 0 ? 'ready' : 'not_ready',
        ...base(),
        ready_providers: ready,
        total_providers: providers.length,
        providers,
      };
      if (!store.healthy)
        return reply.code(503).send({ ...body, code: 'unavailable', message: `the ${deps.storeProbe.driver} database does not answer` });
      if (ready > 0) return reply.code(200).send(body);
      // With no provider at all the message says how to get one (auto never falls back to mock).
      const message =
        providers.length === 0 ? deps.providers.noDefaultMessage() : `no configured provider is healthy (0/${providers.length} ready)`;
      return reply.code(503).send({ ...body, code: 'unavailable', message });
    },
  );

  app.get(
    '/api/v1/pool/status',
    { schema: { tags: ['system'], summary: 'Shared pool status (spec 2.11)', response: { 200: PoolStatus } } },
    async (request) => {
      const settings = deps.settings.pool;
      if (!settings.enabled || !deps.pool) return { enabled: false };
      const view = await deps.pool.view();
      const body: Static<typeof PoolStatus> = {
        enabled: true,
        vms: view.vms,
        max_vms: settings.max_vms,
        total_users: view.total_users,
        max_users_per_vm: settings.max_users_per_vm,
      };
      // Which runtime holds how many workspaces: an operator's view, for admins only.
      if (callerOf(request).admin) body.runtimes = view.runtimes;
      return body;
    },
  );
}
