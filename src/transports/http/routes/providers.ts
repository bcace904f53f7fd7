import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../../../contracts/common.js';
import { ProviderDetail, ProviderListItem, ProviderTestResult } from '../../../contracts/system.js';
import { urlsWithoutCredentials } from '../../../core/url-credentials.js';
import { canonicalProviderName } from '../../../core/providers/registry.js';
import type { HttpDeps } from '../deps.js';

/** How long the detail waits for the engine to say whether the default image is there. */
const IMAGE_CHECK_MS = 5_000;

/** Provider list, detail and test (spec 4.5); `prefix` is '' or '/admin' for the aliases. */
export function providerRoutes(app: FastifyInstance, deps: HttpDeps, prefix = ''): void {
  const tags = ['providers'];
  app.get(
    `/api/v1${prefix}/providers`,
    { schema: { tags, summary: 'Providers with health (this node and online workers)', response: { 200: Type.Array(ProviderListItem) } } },
    async () => deps.locator.providerStatuses(),
  );

  app.get<{ Params: { name: string } }>(
    `/api/v1${prefix}/providers/:name`,
    {
      schema: {
        tags,
        summary: 'Provider detail',
        params: Type.Object({ name: Type.String() }),
        response: { 200: ProviderDetail, 404: ErrorBody },
      },
    },
    async (request) => {
      // Either spelling of a provider's name, answered with the canonical one (DESIGN §12).
      const name = canonicalProviderName(request.params.name);
      const sandbox_count = await deps.sandboxes.countOfProvider(name);
      if (!deps.providers.has(name) || !deps.locator.deps.localWorker) {
        // Offered by workers only: its health is theirs, its settings live on them.
        const health = (await deps.locator.providerStatuses()).find((p) => p.name === name);
        if (!health) deps.providers.get(name); // not_found naming the configured ones
        return { name, healthy: health!.healthy, default: health!.default, sandbox_count, health: health!, config: { runtime: 'remote' } };
      }
      const provider = deps.providers.get(name);
      const health = await deps.providers.status(provider.name);
      // A URL a provider is configured with (hosted `base_url`, …) never shows its credentials.
      const config: Record<string, unknown> = urlsWithoutCredentials(provider.config());
      // A provider with images (docker): the server's default image and whether it is there, so
      // `sbx doctor` reports this server's setting, not its own config's.
      if (provider.imagePresent) {
        const image = deps.settings.defaults.image;
        config.default_image = image;
        config.image_present = await provider.imagePresent(image, AbortSignal.timeout(IMAGE_CHECK_MS)).catch(() => null);
      }
      return { name: provider.name, healthy: health.healthy, default: health.default, sandbox_count, health, config };
    },
  );

  app.post(
    `/api/v1${prefix}/providers/test`,
    { schema: { tags, summary: 'Run provider health checks now', response: { 200: ProviderTestResult } } },
    async () => {
      const out: Record<string, boolean> = {};
      for (const s of await deps.locator.providerStatuses(true)) out[s.name] = s.healthy;
      return out;
    },
  );
}
