import { ExitError } from '../errors.js';
import type { CommandSpec } from '../spec.js';

type RunWorker = (opts: Record<string, unknown>) => Promise<number>;

export const workerCommand: CommandSpec = {
  name: 'worker',
  summary: 'run a remote worker: heartbeats to a control plane and serves worker RPC',
  offline: true,
  options: [
    { flags: '-c, --config <file>', description: 'config file (env SBX_CONFIG)', complete: 'file' },
    { flags: '--id <id>', description: 'worker id (worker.id)' },
    { flags: '--control-plane <url>', description: 'control plane URL (worker.control_plane_url)' },
    { flags: '--listen <addr>', description: 'worker RPC listen address (worker.listen_addr)' },
  ],
  async run(ctx, opts: { config?: string; id?: string; controlPlane?: string; listen?: string }) {
    let runWorker: RunWorker | undefined;
    try {
      // A variable specifier: the worker composition may not be built into this version.
      const modulePath = '../../../compose/worker.js';
      runWorker = ((await import(modulePath)) as { runWorker?: RunWorker }).runWorker;
    } catch {
      runWorker = undefined;
    }
    if (!runWorker) throw new ExitError(1, 'sbx worker is not available yet in this version');
    return runWorker({
      config: opts.config,
      id: opts.id,
      controlPlaneUrl: opts.controlPlane,
      listen: opts.listen,
      signal: ctx.signal,
      ...ctx.out.streams,
      env: ctx.env,
      cwd: ctx.cwd,
      home: ctx.home,
    });
  },
};
