import { homedir } from 'node:os';
import { ConfigError, loadConfig } from '../config/index.js';
import { describeGuard } from '../config/lint.js';
import { createControlPlane } from './control-plane.js';

export interface ServeOptions {
  config?: string;
  port?: number;
  host?: string;
  /** Stops the server when aborted (tests); SIGINT/SIGTERM do the same. */
  signal?: AbortSignal;
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env?: Record<string, string | undefined>;
  cwd?: string;
  home?: string;
  /** Called with the base URL once listening. */
  onListening?: (url: string) => void;
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '::1']);

/** `sbx serve`: load config, start the control plane, serve until a signal; exit code 3 on bad config. */
export async function runServe(opts: ServeOptions): Promise<number> {
  const env = opts.env ?? process.env;
  const home = opts.home ?? env.HOME ?? homedir();
  let loaded;
  try {
    const overrides: Record<string, unknown> = {};
    if (opts.port !== undefined || opts.host !== undefined) {
      overrides.server = { ...(opts.port !== undefined ? { port: opts.port } : {}), ...(opts.host !== undefined ? { host: opts.host } : {}) };
    }
    loaded = await loadConfig({ file: opts.config, env, cwd: opts.cwd ?? process.cwd(), home, overrides });
  } catch (err) {
    if (err instanceof ConfigError) {
      opts.stderr.write(`sbx: ${err.message}\n`);
      return 3;
    }
    throw err;
  }
  const config = loaded.config;

  let plane;
  try {
    plane = await createControlPlane(config, { home });
  } catch (err) {
    opts.stderr.write(`sbx: cannot start: ${(err as Error).message}\n`);
    return 1;
  }
  let url: string;
  try {
    url = await plane.listen();
  } catch (err) {
    await plane.close();
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'EADDRINUSE' ? `port ${config.server.port} is already in use (try --port)` : e.message;
    opts.stderr.write(`sbx: cannot listen on ${config.server.host}:${config.server.port}: ${why}\n`);
    return 1;
  }
  if (!LOOPBACK.has(config.server.host) && !config.auth.enabled) {
    plane.logger.warn(`listening on ${config.server.host} with auth disabled: anyone who can reach this port can run commands`);
  }
  const store = config.database.driver === 'postgres' ? 'postgres' : `sqlite ${config.database.path}`;
  // Which engine docker talks to, and what chose it (providers.docker.*, DOCKER_HOST, a context, the default).
  const dockerAt = plane.deps.providers.has('docker') ? plane.deps.providers.get('docker').config().endpoint : undefined;
  const docker = typeof dockerAt === 'string' ? `, docker: ${dockerAt}` : '';
  plane.logger.info(`sbx ${plane.settings.version} listening on ${url} (provider: ${plane.settings.default_provider}${docker}, store: ${store})`);
  // How auth came out of the config (DESIGN §3 "Auth"), then what an open server still refuses.
  for (const note of loaded.notes) plane.logger[note.level](note.message);
  if (!config.auth.enabled) {
    const admin = config.auth.admin_api_key ? ' except the admin routes (auth.admin_api_key)' : '';
    plane.logger.info(`auth off${admin}; ${describeGuard(config, plane.settings.hostname)}`);
  }
  opts.onListening?.(url);

  await new Promise<void>((resolve) => {
    if (opts.signal?.aborted) return resolve();
    // Whichever comes first stops the server; the other listeners go with it (in-process runs
    // such as tests would otherwise pile them up on `process`).
    const stop = () => {
      opts.signal?.removeEventListener('abort', stop);
      process.removeListener('SIGINT', stop);
      process.removeListener('SIGTERM', stop);
      resolve();
    };
    opts.signal?.addEventListener('abort', stop, { once: true });
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  plane.logger.info('shutting down: draining in-flight requests');
  await plane.close();
  return 0;
}
