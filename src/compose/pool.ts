/**
 * Pool mode (DESIGN.md §8): the pool's provider wrapped so its sandboxes are workspaces of shared
 * runtimes. Refused where it cannot hold: a provider this server does not run or that has no
 * workspaces, and replicas on several hosts (a pool's runtimes live on one).
 */
import type { IdSource, Provider, Store } from '../core/ports/index.js';
import { PoolProvider } from '../core/pool/pool-provider.js';
import type { Replicas } from '../core/replicas/replicas.js';
import type { CoreSettings } from '../core/settings.js';
import { refusePoolAcrossHosts } from './replica-rpc.js';

export async function poolOf(
  providers: readonly Provider[],
  settings: CoreSettings,
  store: Store,
  ids: IdSource,
  replicas: Replicas | null,
): Promise<PoolProvider> {
  if (replicas) await refusePoolAcrossHosts(store, replicas, settings.hostname);
  const base = providers.find((p) => p.name === settings.pool.provider);
  if (!base) throw new Error(`pool.provider "${settings.pool.provider}" is not a provider this server runs`);
  if (!base.workspace) throw new Error(`pool.provider "${settings.pool.provider}" cannot hold pool workspaces`);
  return new PoolProvider(base, {
    settings: settings.pool,
    store,
    overflow: settings.defaults.spawn_overflow,
    queueTimeoutMs: settings.defaults.spawn_queue_timeout_ms,
    runtimeName: () => `pool-${ids.randomId(6)}`,
  });
}
