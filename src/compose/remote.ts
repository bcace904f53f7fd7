/**
 * The worker RPC client of a control plane (DESIGN.md §7): credentials from `auth.worker_*`, mTLS
 * from `worker.rpc_tls.*`, and on replicas the installation key that signs replica tokens.
 */
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { WorkerRecord } from '../core/ports/index.js';
import type { RemoteWorkers } from '../core/scheduler/remote-port.js';
import type { authSettings } from './settings.js';

/**
 * The worker RPC client (DESIGN.md §7), when this server can place on remote workers: credentials
 * from `auth.worker_*`, mTLS from `worker.rpc_tls.*`. Loaded only when configured.
 */
export async function createRemote(
  config: SbxConfig,
  auth: ReturnType<typeof authSettings>,
  logger: Logger,
  replicas?: { isReplica(w: WorkerRecord): boolean; installationKey: string },
): Promise<RemoteWorkers> {
  const { createRemoteWorkers } = await import('../transports/worker-rpc/client/remote-provider.js');
  const tls = config.worker.rpc_tls;
  return createRemoteWorkers({
    credentials: auth.worker,
    tls: {
      enabled: tls.enabled,
      ca_file: tls.ca_file,
      client_cert_file: tls.client_cert_file,
      client_key_file: tls.client_key_file,
      server_name: tls.server_name,
      insecure_skip_verify: tls.insecure_skip_verify,
    },
    log: (fields: Record<string, unknown>, msg: string) => logger.warn(fields, msg),
    ...(replicas ? { replicas } : {}),
  });
}
