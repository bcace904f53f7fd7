/** A real `sbx worker` in this process (mock provider, RPC on 127.0.0.1:0) for the suites that need one. */
import { join } from 'node:path';
import { pino } from 'pino';
import { createWorker, type Worker } from '../../src/compose/worker.js';
import { loadConfig } from '../../src/config/index.js';

export interface TestWorkerOptions {
  id: string;
  /** One control-plane URL, or several comma-separated. */
  controlPlane: string;
  /** `auth.*` of the worker (its token or signing key). */
  auth: Record<string, unknown>;
  /** More `worker.*` keys (rpc_tls, preview_domain, …). */
  worker?: Record<string, unknown>;
  /** `defaults.*` of the worker (max_sandboxes, max_exec_output_mb, …). */
  defaults?: Record<string, unknown>;
}

/** Starts a worker whose files live under `dir` (mock root, state database); stop it with `stop()`. */
export async function startTestWorker(dir: string, o: TestWorkerOptions): Promise<Worker> {
  const { config } = await loadConfig({
    cwd: dir,
    home: dir,
    env: {},
    overrides: {
      providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } },
      auth: o.auth,
      worker: {
        id: o.id,
        control_plane_url: o.controlPlane,
        listen_addr: '127.0.0.1:0',
        heartbeat_interval: '1s',
        state_path: join(dir, `${o.id}.db`),
        ...(o.worker ?? {}),
      },
      logging: { level: 'silent' },
      ...(o.defaults ? { defaults: o.defaults } : {}),
    } as never,
  });
  const w = await createWorker(config, { home: dir, logger: pino({ level: 'silent' }) });
  await w.start();
  return w;
}
