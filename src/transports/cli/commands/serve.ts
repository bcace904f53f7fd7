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
    // The server stack (fastify, SQLite, providers) loads only here.
    const { runServe } = await import('../../../compose/serve.js');
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
