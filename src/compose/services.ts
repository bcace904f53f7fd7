/**
 * Service construction for `sbx serve`: this node's providers (or none), the locator and the core
 * services over them, and the dependencies the HTTP transport receives.
 */
import { join } from 'node:path';
import type { Logger } from 'pino';
import { createProcessLogs } from '../adapters/system/process-logs.js';
import { advertiseUrl } from '../config/advertise.js';
import type { SbxConfig } from '../config/index.js';
import { secretValues } from '../config/index.js';
import { Admission } from '../core/admission/admission.js';
import { QuotaService } from '../core/admission/quotas.js';
import { RateLimiter } from '../core/admission/rate-limiter.js';
import { AuditService } from '../core/audit/audit.js';
import type { EventBus } from '../core/events/bus.js';
import type { EgressStats } from '../core/events/egress-verdicts.js';
import { instrumentProvider } from '../core/observability/instrument.js';
import { OperationStats } from '../core/observability/operations.js';
import { StoreProbe } from '../core/observability/store-health.js';
import type { Clock, IdSource, Provider, Store } from '../core/ports/index.js';
import { ProviderRegistry } from '../core/providers/registry.js';
import { ExecService } from '../core/sandboxes/exec.js';
import { FileService } from '../core/sandboxes/files.js';
import { Idempotency } from '../core/sandboxes/idempotency.js';
import { PreviewService } from '../core/sandboxes/preview.js';
import { ProcessService } from '../core/sandboxes/processes.js';
import { SandboxService } from '../core/sandboxes/service.js';
import { TemplateService } from '../core/sandboxes/templates.js';
import { WarmPool } from '../core/sandboxes/warm.js';
import type { openSecrets } from './secrets.js';
import { LeaseService } from '../core/scheduler/leases.js';
import { RuntimeLocator } from '../core/scheduler/locator.js';
import { REPLICA_CAPABILITY } from '../core/scheduler/placement.js';
import { WorkerService } from '../core/scheduler/workers.js';
import type { CoreSettings } from '../core/settings.js';
import type { HttpDeps } from '../transports/http/deps.js';
import { InflightBudget } from '../transports/http/inflight.js';
import { newPreviewStats } from '../transports/shared/preview/proxy.js';
import type { InstallationSecrets } from './installation.js';
import { poolOf } from './pool.js';
import { type BuiltProviders, buildProviders } from './providers.js';
import { createRemote } from './remote.js';
import { isReplicaWorker, peerLiveness, replicaRpcKey } from './replica-rpc.js';
import type { Replication } from './replicas.js';
import { authSettings, coreSettings, maxInflightBytes, rateLimitSettings } from './settings.js';

export const LOCAL_WORKER_CAPABILITIES = ['api', 'single_node', 'spawn', 'exec', 'files'];

/** What every part of the control plane is built over. */
export interface PlaneBase {
  config: SbxConfig;
  store: Store;
  bus: EventBus;
  clock: Clock;
  ids: IdSource;
  logger: Logger;
  home: string;
  replication: Replication;
  installation: InstallationSecrets;
  secrets: Awaited<ReturnType<typeof openSecrets>>;
}

export interface PlaneProviders {
  built: BuiltProviders;
  providers: ProviderRegistry;
  operations: OperationStats;
  settings: CoreSettings;
  /** A replica that runs sandboxes: the others reach it at its advertised URL. */
  replicaWorker: boolean;
  pool: Awaited<ReturnType<typeof poolOf>> | undefined;
}

/** This node's providers (none for a pure control plane), pooled where pool mode asks, each call timed and counted. */
export async function planeProviders(b: PlaneBase, label: string, given: BuiltProviders | undefined): Promise<PlaneProviders> {
  const { config, clock, replication } = b;
  // A pure control plane runs no provider itself: its sandboxes all live on workers.
  const built =
    config.server.local_worker === false
      ? { providers: [] as Provider[], defaultName: config.providers.default }
      : (given ?? (await buildProviders(config, label, b.bus, b.logger)));
  const providers = new ProviderRegistry(clock, built.defaultName);
  const operations = new OperationStats(() => clock.now());
  const settings = coreSettings(config, built.defaultName, replication.workerId);
  const replicaWorker = replication.replicas.shared && config.server.local_worker !== false;
  // Pool mode (DESIGN §8): the pool's provider is wrapped so its sandboxes are workspaces of shared runtimes.
  const pool = settings.pool.enabled
    ? await poolOf(built.providers, settings, b.store, b.ids, replicaWorker ? replication.replicas : null)
    : undefined;
  // Every provider call is timed and counted for diagnostics `operations` and the Prometheus histograms.
  for (const p of built.providers) providers.register(instrumentProvider(pool && p.name === pool.name ? pool : p, operations));
  return { built, providers, operations, settings, replicaWorker, pool };
}

export interface PlaneServices {
  deps: HttpDeps & { store: Store };
  locator: RuntimeLocator;
  remote: Awaited<ReturnType<typeof createRemote>>;
  workers: WorkerService;
  processes: ProcessService;
  warm: WarmPool | undefined;
  idempotency: Idempotency;
  /** The key replicas sign their RPC with ('' alone). */
  installationKey: string;
  localWorker: boolean;
}

/** The core services over the providers, and the HTTP transport's dependencies. */
export async function planeServices(b: PlaneBase, p: PlaneProviders, egressStats: EgressStats): Promise<PlaneServices> {
  const { config, store, bus, clock, ids, logger, replication, secrets } = b;
  const { replicas } = replication;
  const { providers, settings } = p;
  const admission = new Admission(store, settings, clock, bus, replication.admission);
  const warn = (fields: Record<string, unknown>, msg: string) => logger.warn(fields, msg);
  const auth = authSettings(config);
  const installationKey = replicas.shared ? await replicaRpcKey(store) : '';
  const remote = await createRemote(config, auth, logger, replicas.shared ? { isReplica: isReplicaWorker, installationKey } : undefined);
  const localWorker = config.server.local_worker !== false;
  const locator = new RuntimeLocator({
    store,
    providers,
    remote,
    clock,
    workerId: settings.worker_id,
    localWorker,
    warn,
    ...(replicas.shared ? { peerLive: peerLiveness(replicas) } : {}),
  });
  // Bound once the preview service exists (it needs the sandbox service).
  let preview: PreviewService | undefined;
  const previewToken = (id: string) => (preview?.settings.auth ? preview.token(id) : undefined);
  const sandboxes = new SandboxService({
    store,
    providers,
    locator,
    admission,
    bus,
    clock,
    ids,
    settings,
    warn,
    previewToken,
    secrets,
    forkSecrets: secrets,
  });
  preview = new PreviewService(sandboxes, {
    domain: config.server.preview_domain,
    auth: config.server.preview_auth,
    secret: b.installation.previewSecret,
  });
  const workers = new WorkerService(store, clock, {
    locator,
    remote,
    events: { store, bus },
    // Workers' gateways count their verdicts in each heartbeat; their denials arrive as events.
    onEgress: (d) => {
      egressStats.allowed += d.allowed;
      egressStats.denied += d.denied;
      egressStats.injections += d.injections ?? 0;
    },
  });
  const idempotency = new Idempotency(store, clock, (id) => store.getSandbox(id));
  // Warm pools (DESIGN §11) run where this node's own providers do.
  const warm = localWorker
    ? new WarmPool({ store, providers, settings, clock, ids, resolve: (input) => sandboxes.resolveSpawn(input), warn })
    : undefined;
  sandboxes.deps.warm = warm;
  const exec = new ExecService(sandboxes);
  // Output logs stay on this host; with one process per store every running record is this one's.
  const processes = new ProcessService({
    sandboxes,
    exec,
    store,
    logs: createProcessLogs(join(b.home, '.sbx', 'processes', b.installation.installationId)),
    clock,
    ids,
    bus,
    holder: replicas.shared ? replicas.id : 'local',
    warn,
  });
  const deps: HttpDeps & { store: Store } = {
    settings,
    clock,
    store,
    storeProbe: new StoreProbe(store),
    leases: new LeaseService(store, clock),
    audit: new AuditService(store),
    bus,
    providers,
    admission,
    quotas: new QuotaService({ store, bus, clock, admission }),
    rateLimiter: new RateLimiter(rateLimitSettings(config), clock),
    sandboxes,
    exec,
    processes,
    warm,
    files: new FileService(sandboxes),
    templates: new TemplateService(store, clock, sandboxes),
    workers,
    locator,
    startedAt: Date.now(),
    bodyLimit: Math.floor(config.server.body_limit_mb * 1024 * 1024),
    inflight: new InflightBudget(maxInflightBytes(config)),
    auth,
    corsAllowedOrigins: config.server.cors_allowed_origins,
    allowedHosts: config.server.allowed_hosts,
    ui: config.server.ui,
    mcp: config.server.mcp,
    e2b: config.server.e2b,
    operations: p.operations,
    secrets: secretValues(config),
    pool: p.pool,
    idempotency,
    replicas,
    journal: replication.feed,
    listCursorSecret: b.installation.cursorSecret,
    preview: { service: preview, stats: newPreviewStats() },
    egress: egressStats,
    secretService: secrets,
  };
  return { deps, locator, remote, workers, processes, warm, idempotency, installationKey, localWorker };
}

/**
 * The local worker's heartbeat: a pure control plane (`server.local_worker: false`) is no worker,
 * and a deleted `local` stays deleted. A replica's local worker carries its RPC URL and the
 * replica capability (DESIGN §7); a port the system picks is known only once listening, so until
 * then the row keeps the last URL.
 */
export function localHeartbeat(
  b: PlaneBase,
  p: PlaneProviders,
  s: PlaneServices,
): { beat(status?: string): Promise<void>; listening(port: number): void } {
  const { settings, replicaWorker } = p;
  let rpcUrl = replicaWorker ? advertiseUrl(b.config) : '';
  return {
    listening: (port) => {
      if (replicaWorker) rpcUrl = advertiseUrl(b.config, port);
    },
    beat: async (status = 'online') => {
      if (!s.localWorker || s.locator.localRemoved) return;
      const capacity = {
        max_sandboxes: settings.defaults.max_sandboxes,
        max_sandboxes_per_owner: settings.defaults.max_sandboxes_per_owner,
      };
      await s.workers.heartbeat(settings.worker_id, {
        hostname: settings.hostname,
        status,
        providers: p.providers.names(),
        capabilities: replicaWorker ? [...LOCAL_WORKER_CAPABILITIES, REPLICA_CAPABILITY] : LOCAL_WORKER_CAPABILITIES,
        capacity: replicaWorker && !rpcUrl.endsWith(':0') ? { ...capacity, rpc_url: rpcUrl } : capacity,
      });
    },
  };
}
