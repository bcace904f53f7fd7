/**
 * The wiring of `sbx provider-server`: one real local provider (mock, proot or docker, built as
 * `serve` builds it, from the same catalogue and config) behind the custom HTTP contract's
 * reference server (transports/provider-server).
 */
import { randomBytes } from 'node:crypto';
import { homedir } from 'node:os';
import type { FastifyInstance } from 'fastify';
import { systemClock } from '../adapters/system/clock-ids.js';
import { ConfigError, loadConfig, secretValues } from '../config/index.js';
import { EventBus } from '../core/events/bus.js';
import type { Provider } from '../core/ports/index.js';
import { createLogger } from '../log/logger.js';
import { buildProviderServer } from '../transports/provider-server/app.js';
import { buildProviders } from './providers.js';

export const SERVED_PROVIDERS = ['mock', 'proot', 'docker'] as const;
export type ServedProvider = (typeof SERVED_PROVIDERS)[number];

export interface ProviderServerStart {
  provider: ServedProvider;
  host: string;
  port: number;
  apiKey: string;
  config?: string;
  /** proot's root filesystem (else providers.proot.rootfs). */
  rootfs?: string;
  /** Answer exactly as the anchor's contract documents (see ProviderServerOptions.anchor). */
  anchor?: boolean;
  env?: Record<string, string | undefined>;
  cwd?: string;
  home?: string;
}

export type ProviderServerResult =
  | { ok: true; url: string; provider: Provider; app: FastifyInstance; close: () => Promise<void> }
  | { ok: false; stage: 'config' | 'start' | 'listen'; message: string };

export async function startProviderServer(opts: ProviderServerStart): Promise<ProviderServerResult> {
  const env = opts.env ?? process.env;
  const home = opts.home ?? env.HOME ?? homedir();
  let config;
  try {
    // The chosen provider is the default; every other kind is off, so nothing else starts.
    const off = { enabled: false };
    const overrides = {
      providers: {
        default: opts.provider,
        docker: opts.provider === 'docker' ? {} : off,
        proot: opts.provider === 'proot' ? (opts.rootfs ? { rootfs: opts.rootfs } : {}) : off,
        mock: { enabled: opts.provider === 'mock' },
        custom_http: off,
        hosted: off,
        firecracker: off,
      },
    };
    config = (await loadConfig({ file: opts.config, env, cwd: opts.cwd ?? process.cwd(), home, overrides })).config;
  } catch (err) {
    if (err instanceof ConfigError) return { ok: false, stage: 'config', message: err.message };
    throw err;
  }
  const log = createLogger({ level: config.logging.level, format: config.logging.format, secrets: [...secretValues(config), opts.apiKey] });
  let provider: Provider;
  try {
    const installationId = `ps${randomBytes(4).toString('hex')}`;
    const built = await buildProviders(config, installationId, new EventBus(systemClock), log);
    const found = built.providers.find((p) => p.name === opts.provider);
    if (!found) throw new Error(`provider ${opts.provider} is not available on this host`);
    provider = found;
  } catch (err) {
    return { ok: false, stage: 'start', message: `cannot start: ${(err as Error).message}` };
  }
  const app = await buildProviderServer({
    provider,
    apiKey: opts.apiKey,
    anchor: opts.anchor === true,
    onError: (err) => log.warn({ err: String((err as Error)?.name ?? 'error') }, 'provider call failed'),
  });
  let url: string;
  try {
    url = await app.listen({ host: opts.host, port: opts.port });
  } catch (err) {
    await app.close();
    await provider.close?.();
    return {
      ok: false,
      stage: 'listen',
      message: `cannot listen on ${opts.host}:${opts.port}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
    };
  }
  log.info(`sbx provider-server (${opts.provider}) listening on ${url}`);
  return {
    ok: true,
    url,
    provider,
    app,
    close: async () => {
      await app.close();
      await provider.close?.();
    },
  };
}
