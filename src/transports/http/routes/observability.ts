import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { Diagnostics, Metrics } from '../../../contracts/observability.js';
import type { HttpDeps } from '../deps.js';
import { prometheusFor } from '../metrics/prometheus.js';
import { scrubDeep, secretScrubber } from '../metrics/redact.js';
import { collectSnapshot, diagnosticsBody, metricsBody } from '../metrics/snapshot.js';

const PROMETHEUS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * Diagnostics (spec 2.15), JSON metrics (2.16) and Prometheus text (4.8). `prefix` is '' or
 * '/admin' for the admin aliases (4.9). Every body is scrubbed of configured secret values.
 */
export function observabilityRoutes(app: FastifyInstance, deps: HttpDeps, prefix = ''): void {
  const tags = prefix ? ['admin'] : ['system'];
  const scrub = secretScrubber(deps.secrets);

  app.get(
    `/api/v1${prefix}/diagnostics`,
    { schema: { tags, summary: 'Diagnostics: read-only, redacted state of the whole control plane', response: { 200: Diagnostics } } },
    async () => scrubDeep(diagnosticsBody(deps, await collectSnapshot(deps)), scrub),
  );

  app.get(`/api/v1${prefix}/metrics`, { schema: { tags, summary: 'JSON metrics', response: { 200: Metrics } } }, async () =>
    scrubDeep(metricsBody(deps, await collectSnapshot(deps)), scrub),
  );

  app.get(
    `/api/v1${prefix}/metrics/prometheus`,
    {
      schema: {
        tags,
        summary: 'Prometheus text metrics (prefix sbx_)',
        response: { 200: { description: 'Prometheus text exposition format 0.0.4', content: { 'text/plain': { schema: Type.String() } } } },
      },
    },
    async (_request, reply) => {
      const text = await prometheusFor(deps).render(deps, await collectSnapshot(deps));
      return reply.type(PROMETHEUS_TYPE).send(text);
    },
  );
}
