import { homedir } from 'node:os';
import { join } from 'node:path';
import { createProcessLogs } from '../adapters/system/process-logs.js';
import { ProcessService } from '../core/sandboxes/processes.js';
import { WarmPool } from '../core/sandboxes/warm.js';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { randomIds, systemClock } from '../adapters/system/clock-ids.js';
import type { SbxConfig } from '../config/index.js';
import { tryParseDuration } from '../shared/duration.js';
import { secretValues } from '../config/index.js';
import { Admission } from '../core/admission/admission.js';
import { QuotaService } from '../core/admission/quotas.js';
import { RateLimiter } from '../core/admission/rate-limiter.js';
import { EventBus } from '../core/events/bus.js';
import { instrumentProvider } from '../core/observability/instrument.js';
import { OperationStats } from '../core/observability/operations.js';
import type { Clock, IdSource, Store } from '../core/ports/index.js';
import { ProviderRegistry } from '../core/providers/registry.js';
import { ExecService } from '../core/sandboxes/exec.js';
import { FileService } from '../core/sandboxes/files.js';
import { SandboxService } from '../core/sandboxes/service.js';
import { TemplateService } from '../core/sandboxes/templates.js';
import { LeaseService } from '../core/scheduler/leases.js';
import { RuntimeLocator } from '../core/scheduler/locator.js';
import { WorkerService } from '../core/scheduler/workers.js';
import { AuditService } from '../core/audit/audit.js';
import { StoreProbe } from '../core/observability/store-health.js';
import type { CoreSettings } from '../core/settings.js';
import { createLogger } from '../log/logger.js';
import { egressVerdicts } from '../core/events/egress-verdicts.js';
import { installationSecrets } from './installation.js';
import { poolOf } from './pool.js';
import { mountedTransports } from './http-mounts.js';
import { buildApp } from '../transports/http/app.js';
import type { HttpDeps } from '../transports/http/deps.js';
import { InflightBudget } from '../transports/http/inflight.js';
import { startAuditPruner } from '../transports/http/plugins/audit.js';
import { Idempotency } from '../core/sandboxes/idempotency.js';
import { PreviewService } from '../core/sandboxes/preview.js';
import { previewOnlyServer } from '../transports/http/preview.js';
import { newPreviewStats } from '../transports/shared/preview/proxy.js';
import { type BuiltProviders, buildProviders } from './providers.js';
import { startEgress, storeRules, type EgressHandle } from './egress.js';
import { authSettings, coreSettings, maxInflightBytes, rateLimitSettings } from './settings.js';
import { runtimeLabel, startReplication, type Replication } from './replicas.js';
import { createRemote } from './remote.js';
import { listenOn } from './listen.js';
import { reconcileAtStart, startAutoPause, startLeaderTasks } from './background.js';
import { isReplicaWorker, peerLiveness, replicaRpcKey, replicaRpcRoutes } from './replica-rpc.js';
import { advertiseUrl } from '../config/advertise.js';
import { REPLICA_CAPABILITY } from '../core/scheduler/placement.js';
import { openStore } from './store.js';
import { openSecrets } from './secrets.js';

/** How long `close` lets requests in flight finish before it cuts their connections. */
const CLOSE_DEADLINE_MS = 30_000;

export interface ControlPlaneOptions {
  logger?: Logger;
  clock?: Clock;
  ids?: IdSource;
  /** Home directory used to expand `~` in paths (tests pass a temp dir). */
  home?: string;
  /** Run startup reconciliation (default true). */
  reconcile?: boolean;
  /** Name → addresses for the egress gateway (tests; default: the hosts file, then its own node:dns Resolver). */
  egressResolve?(name: string): Promise<string[]>;
  /** How long `close` lets requests in flight finish before cutting their connections (default 30 s). */
  closeDeadlineMs?: number;
  /**
   * The providers to run instead of those `providers.*` asks for, and the default among them. Tests
   * pass the in-memory provider (adapters/providers/memory) this way; no config names it.
   */
  providers?: BuiltProviders;
}

export interface ControlPlane {
  app: FastifyInstance;
  /** What the HTTP transport gets, plus the store itself for wiring and tests (routes never see it). */
  deps: HttpDeps & { store: Store };
  settings: CoreSettings;
  logger: Logger;
  installationId: string;
  /** Listens on the configured (or given) host/port; resolves with the base URL. */
  listen(opts?: { host?: string; port?: number }): Promise<string>;
  /** Stops timers, drains in-flight requests, closes providers and the store. */
  close(): Promise<void>;
}

const HEARTBEAT_EVERY_MS = 30_000;
const RECONCILE_EVERY_MS = 30_000;
export const LOCAL_WORKER_CAPABILITIES = ['api', 'single_node', 'spawn', 'exec', 'files'];

/** The composition root of `sbx serve`: the only place adapters meet core. */
export async function createControlPlane(config: SbxConfig, opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const logger = opts.logger ?? createLogger({ level: config.logging.level, format: config.logging.format, secrets: secretValues(config) });
  const clock = opts.clock ?? systemClock;
  const ids = opts.ids ?? randomIds;
  const store: Store = await openStore(config, opts.home ?? homedir());
  const timers: NodeJS.Timeout[] = [];
  let replication: Replication | undefined;
  let egress: EgressHandle | null = null;
  try {
    await store.migrate();
    const { installationId, ownerKey, cursorSecret, previewSecret } = await installationSecrets(store, ids);
    // Secrets (DESIGN §15): the key checked against the store's verifier before anything serves.
    const secrets = await openSecrets(config, store, opts.home ?? homedir(), clock);

    const bus = new EventBus(clock);
    // Before anything publishes: with replicas, every event goes through the shared journal.
    replication = await startReplication({ config, store, bus, clock, ids, logger });
    const { replicas } = replication;
    // Replicas label what their providers make with their own worker id (DESIGN §7).
    const label = runtimeLabel(installationId, replication.workerId);
    // A pure control plane runs no provider itself: its sandboxes all live on workers.
    const built =
      config.server.local_worker === false
        ? { providers: [], defaultName: config.providers.default }
        : (opts.providers ?? (await buildProviders(config, label, bus, logger)));
    const providers = new ProviderRegistry(clock, built.defaultName);
    const operations = new OperationStats(() => clock.now());
    const settings = coreSettings(config, built.defaultName, replication.workerId);
    // Replicas that run sandboxes reach each other at their advertised URL (its port once listening).
    const replicaWorker = replicas.shared && config.server.local_worker !== false;
    let rpcUrl = replicaWorker ? advertiseUrl(config) : '';
    // Pool mode (DESIGN §8): the pool's provider is wrapped so its sandboxes are workspaces of shared runtimes.
    const pool = settings.pool.enabled ? await poolOf(built.providers, settings, store, ids, replicaWorker ? replicas : null) : undefined;
    // Every provider call is timed and counted for diagnostics `operations` and the Prometheus histograms.
    for (const p of built.providers) providers.register(instrumentProvider(pool && p.name === pool.name ? pool : p, operations));
    // Each verdict counts (sbx_egress_connections_total); each denial is a network.denied event, visible as its sandbox is.
    const { stats: egressStats, onVerdict: egressVerdict } = egressVerdicts(store, bus);
    // Filtered sandboxes (DESIGN §10): the docker provider's network, firewall, DNS refuser and gateway.
    if (!pool)
      egress = await startEgress({
        config,
        providers: built.providers,
        rules: storeRules(store),
        secrets,
        logger,
        onVerdict: (v) => egressVerdict(v),
        // DESIGN §15: the node's CA lives in this data dir; each injected request counts.
        home: opts.home ?? homedir(),
        onInjection: () => void egressStats.injections++,
        ...(opts.egressResolve ? { resolve: opts.egressResolve } : {}),
      });

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
      secret: previewSecret,
    });
    const workers = new WorkerService(store, clock, {
      locator,
      remote,
      events: { store, bus },
      // Workers' gateways count their verdicts in each heartbeat; their denials arrive as events.
      onEgress: (d) => {
        egressStats.allowed += d.allowed;
        egressStats.denied += d.denied;
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
      logs: createProcessLogs(join(opts.home ?? homedir(), '.sbx', 'processes', installationId)),
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
      operations,
      secrets: secretValues(config),
      pool,
      idempotency,
      replicas,
      journal: replication.feed,
      listCursorSecret: cursorSecret,
      preview: {
        service: preview,
        stats: newPreviewStats(),
      },
      egress: egressStats,
      secretService: secrets,
    };

    // A pure control plane (`server.local_worker: false`) is no worker; a deleted `local` stays deleted.
    // A replica's local worker carries its RPC URL and the replica capability (DESIGN §7).
    const heartbeat = async (status = 'online') => {
      if (!localWorker || locator.localRemoved) return;
      const capacity = {
        max_sandboxes: settings.defaults.max_sandboxes,
        max_sandboxes_per_owner: settings.defaults.max_sandboxes_per_owner,
      };
      await workers.heartbeat(settings.worker_id, {
        hostname: settings.hostname,
        status,
        providers: providers.names(),
        capabilities: replicaWorker ? [...LOCAL_WORKER_CAPABILITIES, REPLICA_CAPABILITY] : LOCAL_WORKER_CAPABILITIES,
        // A port the system picks is known only once listening: until then the row keeps the last URL.
        capacity: replicaWorker && !rpcUrl.endsWith(':0') ? { ...capacity, rpc_url: rpcUrl } : capacity,
      });
    };
    await heartbeat();

    // Startup reconciliation (records judged before serving, leftovers cleaned in the background).
    const { cleanup, reconcileWorkers } = await reconcileAtStart({
      run: opts.reconcile !== false,
      store,
      providers,
      bus,
      clock,
      locator,
      label,
      workerId: settings.worker_id,
      shared: replicas.shared,
      logger,
      // Detached background processes ran on while this process was away: follow them again.
      resume: async () => {
        await processes.resume().catch((err: unknown) => logger.warn({ err: String(err) }, 'resuming background processes failed'));
        await warm?.start().catch((err: unknown) => logger.warn({ err: String(err) }, 'starting the warm pools failed'));
      },
    });

    // Fastify's own info lines ("Server listening at …") would repeat what `serve` logs once; what
    // the HTTP layer itself logs is warn and above.
    const values = logger.levels.values;
    const httpLevel = (values[logger.level] ?? 0) > (values.warn ?? 40) ? logger.level : 'warn';
    const rpc = replicaWorker
      ? [
          replicaRpcRoutes({
            store,
            providers,
            workerId: settings.worker_id,
            installationKey,
            clock,
            logger,
            home: opts.home ?? homedir(),
            spawnDefaults: {
              provider: built.defaultName,
              image: config.defaults.image,
              memory_mb: config.defaults.memory_mb,
              vcpus: config.defaults.vcpus,
            },
          }),
        ]
      : [];
    const app = await buildApp(deps, {
      logger: logger.child({}, { level: httpLevel }),
      derivedOwnerKey: Buffer.from(ownerKey, 'hex'),
      routes: [...mountedTransports(deps), ...rpc],
    });

    startLeaderTasks({
      replication,
      sandboxes,
      processes,
      idempotency,
      reconcileWorkers: opts.reconcile !== false ? reconcileWorkers : null,
      reconcileEveryMs: tryParseDuration(config.server.reconcile_interval) ?? RECONCILE_EVERY_MS,
      reapLocal: replicas.shared && localWorker,
      timers,
      logger,
    });
    timers.push(setInterval(() => void heartbeat().catch(() => undefined), HEARTBEAT_EVERY_MS));
    await startAutoPause(sandboxes, timers, logger);
    for (const t of timers) t.unref();
    const auditPruner = startAuditPruner(store, clock, deps.auth.audit_retention_ms, (err) =>
      logger.warn({ err: String(err) }, 'admin audit pruning failed'),
    );
    if (auditPruner) timers.push(auditPruner);

    // `server.preview_addr`: previews alone on a listener of their own (DESIGN §9).
    const previewServer = config.server.preview_addr ? previewOnlyServer(deps) : null;
    let closed = false;
    return {
      app,
      deps,
      settings,
      logger,
      installationId,
      async listen(o = {}) {
        const host = o.host ?? config.server.host;
        const port = o.port ?? config.server.port;
        await app.listen({ host, port });
        const addr = app.server.address();
        const actualPort = typeof addr === 'object' && addr ? addr.port : port;
        // The other replicas learn this one's RPC URL (with the port the system chose) at once.
        if (replicaWorker) {
          rpcUrl = advertiseUrl(config, actualPort);
          await heartbeat();
        }
        if (previewServer && !previewServer.listening) await listenOn(previewServer, config.server.preview_addr);
        const shownHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
        return `http://${shownHost}:${actualPort}`;
      },
      async close() {
        if (closed) return;
        closed = true;
        for (const t of timers) clearInterval(t);
        await cleanup;
        // Queued spawns fail now instead of holding the drain for their whole queue timeout.
        deps.admission.close();
        // In-flight requests finish; a keep-alive connection is closed as soon as its last response
        // is out (fastify closes only the connections idle at the moment close starts).
        const sweeper = setInterval(() => app.server.closeIdleConnections(), 100);
        // The drain has a deadline: a connection that never finishes a request (a browser's
        // speculative preconnect, a stalled proxy exchange, an exec longer than that) is cut after 30 s.
        const deadline = setTimeout(() => app.server.closeAllConnections(), opts.closeDeadlineMs ?? CLOSE_DEADLINE_MS);
        deadline.unref();
        try {
          await app.close();
          await processes.close();
          await warm?.close().catch((err: unknown) => logger.warn({ err: String(err) }, 'stopping the warm pools failed'));
          if (previewServer?.listening) {
            previewServer.closeAllConnections();
            await new Promise<void>((resolve) => previewServer.close(() => resolve()));
          }
        } finally {
          clearInterval(sweeper);
          clearTimeout(deadline);
        }
        // Stopped: the other replicas mark its sandboxes unhealthy until it returns (DESIGN §7).
        if (replicaWorker) await heartbeat('offline').catch(() => undefined);
        await egress?.close().catch(() => undefined);
        await providers.close();
        await remote?.close?.();
        await replication?.close();
        await store.close();
      },
    };
  } catch (err) {
    for (const t of timers) clearInterval(t);
    await egress?.close().catch(() => undefined);
    await replication?.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw err;
  }
}
