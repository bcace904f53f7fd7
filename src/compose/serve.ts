import { homedir } from 'node:os';
import { ConfigError, loadConfig } from '../config/index.js';
import { describeGuard } from '../config/lint.js';
import { createControlPlane } from './control-plane.js';

/** What `sbx serve` asks for; the command turns the outcome into output and an exit code. */
export interface StartOptions {
  config?: string;
  port?: number;
  host?: string;
  env?: Record<string, string | undefined>;
  cwd?: string;
  home?: string;
}

/**
 * A started control plane, or why it did not start: `config` (a bad config: the CLI's exit code 3),
 * `start` (the control plane could not be built) or `listen` (the address was refused).
 */
export type StartResult =
  | { ok: true; url: string; close: () => Promise<void> }
  | { ok: false; stage: 'config' | 'start' | 'listen'; message: string };

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

/** The wiring of `sbx serve`: load config, build and start the control plane, log how it came up. */
export async function startServer(opts: StartOptions): Promise<StartResult> {
  const env = opts.env ?? process.env;
  const home = opts.home ?? env.HOME ?? homedir();
  let loaded;
  try {
    const overrides: Record<string, unknown> = {};
    if (opts.port !== undefined || opts.host !== undefined) {
      overrides.server = {
        ...(opts.port !== undefined ? { port: opts.port } : {}),
        ...(opts.host !== undefined ? { host: opts.host } : {}),
      };
    }
    loaded = await loadConfig({ file: opts.config, env, cwd: opts.cwd ?? process.cwd(), home, overrides });
  } catch (err) {
    if (err instanceof ConfigError) return { ok: false, stage: 'config', message: err.message };
    throw err;
  }
  const config = loaded.config;

  let plane;
  try {
    plane = await createControlPlane(config, { home });
  } catch (err) {
    return { ok: false, stage: 'start', message: `cannot start: ${(err as Error).message}` };
  }
  let url: string;
  try {
    url = await plane.listen();
  } catch (err) {
    await plane.close();
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'EADDRINUSE' ? `port ${config.server.port} is already in use (try --port)` : e.message;
    return { ok: false, stage: 'listen', message: `cannot listen on ${config.server.host}:${config.server.port}: ${why}` };
  }
  if (!LOOPBACK.has(config.server.host) && !config.auth.enabled) {
    plane.logger.warn(`listening on ${config.server.host} with auth disabled: anyone who can reach this port can run commands`);
  }
  const store = config.database.driver === 'postgres' ? 'postgres' : `sqlite ${config.database.path}`;
  // Which engine docker talks to, and what chose it (providers.docker.*, DOCKER_HOST, a context, the default).
  const dockerAt = plane.deps.providers.has('docker') ? plane.deps.providers.get('docker').config().endpoint : undefined;
  const docker = typeof dockerAt === 'string' ? `, docker: ${dockerAt}` : '';
  // A pure control plane (`server.local_worker: false`) runs nothing itself: its providers are its workers'.
  const provider = config.server.local_worker === false ? 'none here: sandboxes run on workers' : plane.settings.default_provider;
  plane.logger.info(`sbx ${plane.settings.version} listening on ${url} (provider: ${provider}${docker}, store: ${store})`);
  // How auth came out of the config (DESIGN §3 "Auth"), then what an open server still refuses.
  for (const note of loaded.notes) plane.logger[note.level](note.message);
  if (!config.auth.enabled) {
    const admin = config.auth.admin_api_key ? ' except the admin routes (auth.admin_api_key)' : '';
    plane.logger.info(`auth off${admin}; ${describeGuard(config, plane.settings.hostname)}`);
  }
  const server = plane;
  return {
    ok: true,
    url,
    close: async () => {
      server.logger.info('shutting down: draining in-flight requests');
      await server.close();
    },
  };
}
