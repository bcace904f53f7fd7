import type { CommandSpec } from '../spec.js';

export const serveCommand: CommandSpec = {
  name: 'serve',
  summary: 'run the control plane: HTTP API, store, providers, reaper, events',
  offline: true,
  stopsOnSignal: true,
  options: [
    { flags: '-p, --port <port>', description: 'listen port (server.port; default 7423)', kind: 'int' },
    { flags: '--host <host>', description: 'listen address (server.host; default 127.0.0.1)' },
    { flags: '-c, --config <file>', description: 'config file (env SBX_CONFIG)', complete: 'file' },
  ],
  examples: ['sbx serve', 'sbx serve --port 8080 --config ./sbx.yaml'],
  async run(ctx, opts: { port?: number; host?: string; config?: string }) {
    return runServe({
      config: opts.config,
      port: opts.port,
      host: opts.host,
      signal: ctx.signal,
      ...ctx.out.streams,
      env: ctx.env,
      cwd: ctx.cwd,
      home: ctx.home,
    });
  },
};

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

/** `sbx serve`: start the control plane (compose), serve until a signal; exit code 3 on bad config, 1 when it cannot start. */
export async function runServe(opts: ServeOptions): Promise<number> {
  // The server stack (config, fastify, SQLite, providers) loads only here.
  const { startServer } = await import('../../../compose/serve.js');
  const started = await startServer({
    config: opts.config,
    port: opts.port,
    host: opts.host,
    env: opts.env,
    cwd: opts.cwd,
    home: opts.home,
  });
  if (!started.ok) {
    opts.stderr.write(`sbx: ${started.message}\n`);
    return started.stage === 'config' ? 3 : 1;
  }
  opts.onListening?.(started.url);

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
  await started.close();
  return 0;
}
