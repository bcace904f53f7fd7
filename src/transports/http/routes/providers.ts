import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { ProviderDetail, ProviderListItem, ProviderTestResult } from '../../../contracts/system.js';
import type { HttpDeps } from '../deps.js';

/** Provider list, detail and test (spec 4.5); `prefix` is '' or '/admin' for the aliases. */
export function providerRoutes(app: FastifyInstance, deps: HttpDeps, prefix = ''): void {
  const tags = ['providers'];
  app.get(`/api/v1${prefix}/providers`, { schema: { tags, summary: 'Providers with health', response: { 200: Type.Array(ProviderListItem) } } }, async () =>
    deps.providers.statuses(),
  );

  app.get<{ Params: { name: string } }>(
    `/api/v1${prefix}/providers/:name`,
    { schema: { tags, summary: 'Provider detail', params: Type.Object({ name: Type.String() }), response: { 200: ProviderDetail, 404: ErrorBody } } },
    async (request) => {
      const provider = deps.providers.get(request.params.name);
      const health = await deps.providers.status(provider.name);
      const live = await deps.sandboxes.list({ owner_id: null, admin: true });
      return {
        name: provider.name,
        healthy: health.healthy,
        default: health.default,
        sandbox_count: live.filter((s) => s.provider === provider.name).length,
        health,
        config: provider.config(),
      };
    },
  );

  app.post(`/api/v1${prefix}/providers/test`, { schema: { tags, summary: 'Run provider health checks now', response: { 200: ProviderTestResult } } }, async () => {
    const out: Record<string, boolean> = {};
    for (const s of await deps.providers.statuses(true)) out[s.name] = s.healthy;
    return out;
  });
}
