import type { CommandSpec } from '../spec.js';
import { workerTokenCommand } from './worker-token.js';

interface WorkerFlags {
  id?: string;
  controlPlane?: string;
  listen?: string;
  advertiseUrl?: string;
  previewDomain?: string;
  heartbeatInterval?: string;
  workerTokenFile?: string;
  signingKeyFile?: string;
  once?: boolean;
  config?: string;
}

export const workerCommand: CommandSpec = {
  name: 'worker',
  summary: 'run a remote worker: heartbeats to a control plane and serves the worker RPC',
  description:
    "Runs the providers enabled in this machine's config (providers.*) for a control plane on another\n" +
    'machine. With --listen it serves POST /rpc (and the exec WebSocket) for remote sandboxes; without\n' +
    'it, it only heartbeats. Credentials: auth.worker_token[_file] or auth.worker_signing_key[_file]\n' +
    '(the same keys as the control plane). SIGTERM/SIGINT drains: new spawns are refused, calls in\n' +
    'flight finish, a last heartbeat says draining, and it exits 0 leaving its sandboxes running.',
  offline: true,
  stopsOnSignal: true,
  options: [
    { flags: '--id <id>', description: 'worker id (worker.id; default the host name)' },
    {
      flags: '--control-plane <url>',
      description: 'control plane URL, or several comma-separated (replicas, tried in turn; worker.control_plane_url; required)',
    },
    { flags: '--listen <addr>', description: 'serve the worker RPC on HOST:PORT (worker.listen_addr)' },
    { flags: '--advertise-url <url>', description: 'RPC URL the control plane calls (worker.advertise_url; default http(s)://<listen>)' },
    { flags: '--preview-domain <domain>', description: 'preview domain of this worker (worker.preview_domain)' },
    {
      flags: '--heartbeat-interval <duration>',
      description: 'heartbeat period (worker.heartbeat_interval; default 30s, at least 1s)',
      kind: 'duration',
    },
    {
      flags: '--worker-token-file <file>',
      description: 'static worker token, read again at each use (auth.worker_token_file)',
      complete: 'file',
    },
    {
      flags: '--signing-key-file <file>',
      description: 'HMAC key to mint its own 5-minute tokens (auth.worker_signing_key_file)',
      complete: 'file',
    },
    { flags: '--once', description: 'send one heartbeat and exit (0, or 1 with the reason)', kind: 'boolean' },
    { flags: '-c, --config <file>', description: 'config file (env SBX_CONFIG)', complete: 'file' },
  ],
  subcommands: [workerTokenCommand],
  examples: [
    'sbx worker --id w1 --control-plane http://10.0.0.1:7423 --listen 10.0.0.2:7430',
    'SVC_AUTH_WORKER_TOKEN=… sbx worker --control-plane https://cp.example --listen 0.0.0.0:7430 --advertise-url https://w1.example:7430',
    'sbx worker --control-plane http://cp:7423 --once',
  ],
  async run(ctx, opts: WorkerFlags) {
    // The worker stack (config, fastify, SQLite, providers) loads only here.
    const [{ loadConfig, ConfigError }, { createWorker }] = await Promise.all([
      import('../../../config/index.js'),
      import('../../../compose/worker.js'),
    ]);
    const worker: Record<string, unknown> = {};
    const auth: Record<string, unknown> = {};
    if (opts.id !== undefined) worker.id = opts.id;
    if (opts.controlPlane !== undefined) worker.control_plane_url = opts.controlPlane;
    if (opts.listen !== undefined) worker.listen_addr = opts.listen;
    if (opts.advertiseUrl !== undefined) worker.advertise_url = opts.advertiseUrl;
    if (opts.previewDomain !== undefined) worker.preview_domain = opts.previewDomain;
    if (opts.heartbeatInterval !== undefined) worker.heartbeat_interval = opts.heartbeatInterval;
    if (opts.workerTokenFile !== undefined) auth.worker_token_file = opts.workerTokenFile;
    if (opts.signingKeyFile !== undefined) auth.worker_signing_key_file = opts.signingKeyFile;
    let config;
    try {
      ({ config } = await loadConfig({
        file: opts.config,
        env: ctx.env,
        cwd: ctx.cwd,
        home: ctx.home,
        overrides: { worker, auth } as never,
      }));
    } catch (err) {
      if (err instanceof ConfigError) {
        ctx.out.error(err.message);
        return 3;
      }
      throw err;
    }
    let w;
    try {
      w = await createWorker(config, { home: ctx.home });
    } catch (err) {
      ctx.out.error(`cannot start the worker: ${(err as Error).message}`);
      return 1;
    }
    if (opts.once) {
      try {
        await w.heartbeat();
        ctx.out.line(`worker ${w.id}: heartbeat accepted by ${w.controlPlane}`);
        return 0;
      } catch (err) {
        ctx.out.error((err as Error).message);
        return 1;
      } finally {
        await w.stop().catch(() => undefined);
      }
    }
    try {
      await w.start();
    } catch (err) {
      ctx.out.error((err as Error).message);
      await w.stop().catch(() => undefined);
      return 1;
    }
    w.logger.info(
      `sbx worker ${w.id} up: rpc ${w.rpcUrl ?? 'off (no --listen)'}, control plane ${w.controlPlane}, ` +
        `providers ${w.providers.join(', ') || 'none'}`,
    );
    await new Promise<void>((resolve) => {
      if (ctx.signal.aborted) return resolve();
      const stop = () => {
        ctx.signal.removeEventListener('abort', stop);
        process.removeListener('SIGINT', stop);
        process.removeListener('SIGTERM', stop);
        resolve();
      };
      ctx.signal.addEventListener('abort', stop, { once: true });
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
    w.logger.info(`worker ${w.id} draining: new spawns refused, calls in flight finish; sandboxes keep running`);
    await w.stop();
    return 0;
  },
};
