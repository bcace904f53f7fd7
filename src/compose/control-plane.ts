import { homedir } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { randomIds, systemClock } from '../adapters/system/clock-ids.js';
import type { SbxConfig } from '../config/index.js';
import { secretValues } from '../config/index.js';
import { EventBus } from '../core/events/bus.js';
import { egressVerdicts } from '../core/events/egress-verdicts.js';
import type { Clock, IdSource, Store } from '../core/ports/index.js';
import type { CoreSettings } from '../core/settings.js';
import { createLogger } from '../log/logger.js';
import { tryParseDuration } from '../shared/duration.js';
import { buildApp } from '../transports/http/app.js';
import type { HttpDeps } from '../transports/http/deps.js';
import { pruneAudit } from '../transports/http/plugins/audit.js';
import { previewOnlyServer } from '../transports/http/preview.js';
import { backgroundTasks, reconcileAtStart, startBackground } from './background.js';
import { type EgressHandle, startEgress, storeRules } from './egress.js';
import { mountedTransports } from './http-mounts.js';
import { installationSecrets } from './installation.js';
import { listenOn } from './listen.js';
import type { BuiltProviders } from './providers.js';
import { replicaRpcRoutes } from './replica-rpc.js';
import { type Replication, runtimeLabel, startReplication } from './replicas.js';
import { openSecrets } from './secrets.js';
import { localHeartbeat, type PlaneBase, type PlaneProviders, type PlaneServices, planeProviders, planeServices } from './services.js';
import { openStore } from './store.js';

export { LOCAL_WORKER_CAPABILITIES } from './services.js';

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

/** The composition root of `sbx serve`: the only place adapters meet core. */
export async function createControlPlane(config: SbxConfig, opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const logger = opts.logger ?? createLogger({ level: config.logging.level, format: config.logging.format, secrets: secretValues(config) });
  const clock = opts.clock ?? systemClock;
  const ids = opts.ids ?? randomIds;
  const home = opts.home ?? homedir();
  const store: Store = await openStore(config, home);
  let background: { stop(): void } | undefined;
  let replication: Replication | undefined;
  let egress: EgressHandle | null = null;
  try {
    await store.migrate();
    const installation = await installationSecrets(store, ids);
    // Secrets (DESIGN §15): the key checked against the store's verifier before anything serves.
    const bus = new EventBus(clock);
    const secrets = await openSecrets(config, store, home, clock, bus);
    // Before anything publishes: with replicas, every event goes through the shared journal.
    replication = await startReplication({ config, store, bus, clock, ids, logger });
    const b: PlaneBase = { config, store, bus, clock, ids, logger, home, replication, installation, secrets };
    // Replicas label what their providers make with their own worker id (DESIGN §7).
    const label = runtimeLabel(installation.installationId, replication.workerId);
    const p = await planeProviders(b, label, opts.providers);
    // Each verdict counts (sbx_egress_connections_total); each denial is a network.denied event, visible as its sandbox is.
    const { stats: egressStats, onVerdict: egressVerdict } = egressVerdicts(store, bus);
    // Filtered sandboxes (DESIGN §10): the docker provider's network, firewall, DNS refuser and gateway.
    if (!p.pool)
      egress = await startEgress({
        config,
        providers: p.built.providers,
        rules: storeRules(store),
        secrets,
        logger,
        onVerdict: (v) => egressVerdict(v),
        // DESIGN §15: the node's CA lives in this data dir; each injected request counts.
        home,
        onInjection: () => void egressStats.injections++,
        ...(opts.egressResolve ? { resolve: opts.egressResolve } : {}),
      });
    const s = await planeServices(b, p, egressStats);
    const heartbeat = localHeartbeat(b, p, s);
    await heartbeat.beat();
    // Startup reconciliation (records judged before serving, leftovers cleaned in the background).
    const { cleanup, reconcileWorkers } = await reconcileAtStart({
      run: opts.reconcile !== false,
      store,
      providers: p.providers,
      bus,
      clock,
      locator: s.locator,
      label,
      workerId: p.settings.worker_id,
      shared: replication.replicas.shared,
      logger,
      // Detached background processes ran on while this process was away: follow them again.
      resume: async () => {
        await s.processes.resume().catch((err: unknown) => logger.warn({ err: String(err) }, 'resuming background processes failed'));
        await s.warm?.start().catch((err: unknown) => logger.warn({ err: String(err) }, 'starting the warm pools failed'));
      },
    });
    const app = await httpApp(b, p, s);
    await s.deps.sandboxes.pauses
      .watchAtStart()
      .catch((err: unknown) => logger.warn({ err: String(err) }, 'watching sandboxes for auto-pause failed'));
    const retentionMs = s.deps.auth.audit_retention_ms;
    const tasks = backgroundTasks({
      replication,
      sandboxes: s.deps.sandboxes,
      processes: s.processes,
      idempotency: s.idempotency,
      reconcileWorkers: opts.reconcile !== false ? reconcileWorkers : null,
      reconcileEveryMs: tryParseDuration(config.server.reconcile_interval) ?? RECONCILE_EVERY_MS,
      reapLocal: replication.replicas.shared && s.localWorker,
      heartbeat: () => heartbeat.beat().catch(() => undefined),
      heartbeatEveryMs: HEARTBEAT_EVERY_MS,
      pruneAudit: retentionMs > 0 ? () => pruneAudit(store, clock, retentionMs) : null,
    });
    background = startBackground(tasks, replication.replicas, logger);
    const stopBackground = background.stop;
    // `server.preview_addr`: previews alone on a listener of their own (DESIGN §9).
    const previewServer = config.server.preview_addr ? previewOnlyServer(s.deps) : null;
    let closed = false;
    const plane: ControlPlane = {
      app,
      deps: s.deps,
      settings: p.settings,
      logger,
      installationId: installation.installationId,
      async listen(o = {}) {
        const host = o.host ?? config.server.host;
        const port = o.port ?? config.server.port;
        await app.listen({ host, port });
        const addr = app.server.address();
        const actualPort = typeof addr === 'object' && addr ? addr.port : port;
        // The other replicas learn this one's RPC URL (with the port the system chose) at once.
        if (p.replicaWorker) {
          heartbeat.listening(actualPort);
          await heartbeat.beat();
        }
        if (previewServer && !previewServer.listening) await listenOn(previewServer, config.server.preview_addr);
        const shownHost = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
        return `http://${shownHost}:${actualPort}`;
      },
      async close() {
        if (closed) return;
        closed = true;
        stopBackground();
        await cleanup;
        await closeSequence({ app, previewServer, s, p, egress, replication: b.replication, store, logger }, opts, heartbeat.beat);
      },
    };
    return plane;
  } catch (err) {
    background?.stop();
    await egress?.close().catch(() => undefined);
    await replication?.close().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw err;
  }
}

/** The API app: the routes, the mounted sibling transports and, on a replica that runs sandboxes, the replica RPC. */
async function httpApp(b: PlaneBase, p: PlaneProviders, s: PlaneServices): Promise<FastifyInstance> {
  const { config, logger } = b;
  // Fastify's own info lines ("Server listening at …") would repeat what `serve` logs once; what
  // the HTTP layer itself logs is warn and above.
  const values = logger.levels.values;
  const httpLevel = (values[logger.level] ?? 0) > (values.warn ?? 40) ? logger.level : 'warn';
  const rpc = p.replicaWorker
    ? [
        replicaRpcRoutes({
          store: b.store,
          providers: p.providers,
          workerId: p.settings.worker_id,
          installationKey: s.installationKey,
          clock: b.clock,
          logger,
          home: b.home,
          spawnDefaults: {
            provider: p.built.defaultName,
            image: config.defaults.image,
            memory_mb: config.defaults.memory_mb,
            vcpus: config.defaults.vcpus,
          },
        }),
      ]
    : [];
  return buildApp(s.deps, {
    logger: logger.child({}, { level: httpLevel }),
    derivedOwnerKey: Buffer.from(b.installation.ownerKey, 'hex'),
    routes: [...mountedTransports(s.deps), ...rpc],
  });
}

/**
 * The close sequence, after the background tasks stopped: queued spawns fail, requests in flight
 * drain (with a deadline), processes and warm pools stop, the preview listener closes; then the
 * local worker goes offline, and the egress, providers, remote client, replication and store close.
 */
async function closeSequence(
  c: {
    app: FastifyInstance;
    previewServer: ReturnType<typeof previewOnlyServer> | null;
    s: PlaneServices;
    p: PlaneProviders;
    egress: EgressHandle | null;
    replication: Replication;
    store: Store;
    logger: Logger;
  },
  opts: ControlPlaneOptions,
  heartbeat: (status: string) => Promise<void>,
): Promise<void> {
  const { app, previewServer, s, logger } = c;
  // Queued spawns fail now instead of holding the drain for their whole queue timeout.
  s.deps.admission.close();
  // In-flight requests finish; a keep-alive connection is closed as soon as its last response
  // is out (fastify closes only the connections idle at the moment close starts).
  const sweeper = setInterval(() => app.server.closeIdleConnections(), 100);
  // The drain has a deadline: a connection that never finishes a request (a browser's
  // speculative preconnect, a stalled proxy exchange, an exec longer than that) is cut after 30 s.
  const deadline = setTimeout(() => app.server.closeAllConnections(), opts.closeDeadlineMs ?? CLOSE_DEADLINE_MS);
  deadline.unref();
  try {
    await app.close();
    await s.processes.close();
    await s.warm?.close().catch((err: unknown) => logger.warn({ err: String(err) }, 'stopping the warm pools failed'));
    if (previewServer?.listening) {
      previewServer.closeAllConnections();
      await new Promise<void>((resolve) => previewServer.close(() => resolve()));
    }
  } finally {
    clearInterval(sweeper);
    clearTimeout(deadline);
  }
  // Stopped: the other replicas mark its sandboxes unhealthy until it returns (DESIGN §7).
  if (c.p.replicaWorker) await heartbeat('offline').catch(() => undefined);
  await c.egress?.close().catch(() => undefined);
  await c.p.providers.close();
  await s.remote?.close?.();
  await c.replication.close();
  await c.store.close();
}
