/**
 * The composition root of `sbx worker` (DESIGN.md §7): its providers, its own state, its RPC
 * server and the heartbeat loop to the control plane. It never touches the control plane's
 * database; runtimes outlive the process (the control plane owns them), so a restarted worker
 * picks them up from its state.
 */
import { randomBytes } from 'node:crypto';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { openWorkerState } from '../adapters/stores/worker-state/index.js';
import { systemClock } from '../adapters/system/clock-ids.js';
import type { WorkerSandboxSecrets } from '../client/types.js';
import type { SbxConfig } from '../config/index.js';
import { secretValues } from '../config/index.js';
import { parseDuration } from '../core/duration.js';
import { EventBus } from '../core/events/bus.js';
import type { Clock, Provider } from '../core/ports/index.js';
import type { WorkerState } from '../core/scheduler/worker-state-port.js';
import type { SecretSource } from '../core/secrets/port.js';
import { createLogger } from '../log/logger.js';
import { buildProviders } from './providers.js';
import { startWorkerEgress, type WorkerEgress } from './worker-egress.js';
import {
  type ControlPlaneCall,
  controlPlaneCaller,
  controlPlaneUrls,
  credentialsFrom,
  denialSender,
  heartbeatLoop,
} from './worker-links.js';
import { drainRpc, rpcServer } from './worker-rpc-server.js';
import { secretsTransportOk, workerSecretSource } from './worker-secrets.js';

export interface WorkerOptions {
  logger?: Logger;
  clock?: Clock;
  home?: string;
  /** Name → addresses for the egress gateway (tests); default: the hosts file, then its own node:dns Resolver. */
  egressResolve?(name: string): Promise<string[]>;
}

export interface Worker {
  id: string;
  /** This worker's installation id: the label on the docker objects it makes. */
  installationId: string;
  /** The advertised RPC URL (its real port once listening), or null when the worker only heartbeats. */
  readonly rpcUrl: string | null;
  controlPlane: string;
  providers: string[];
  logger: Logger;
  /** The bound secrets of this worker's sandboxes as its egress gateway reads them (DESIGN §15). */
  secrets: SecretSource;
  /** Sends one heartbeat now (throws a one-line reason on failure). */
  heartbeat(): Promise<void>;
  /** Starts listening (when `listen_addr` is set) and the heartbeat loop; the first heartbeat must succeed. */
  start(): Promise<void>;
  /** Draining: spawns refused, in-flight calls finish (≤ 30 s), a last `draining` heartbeat, then closed. Runtimes keep running. */
  stop(): Promise<void>;
  draining(): boolean;
}

const CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'logs'];
/** Capabilities a provider may have or not, advertised per provider as `<capability>:<provider>`. */
const PER_PROVIDER = ['tty'];

/** `tty:docker` and the like: what each provider of this worker really has (DESIGN §7 heartbeat). */
function providerCapabilities(providers: readonly Provider[]): string[] {
  return providers.flatMap((p) => PER_PROVIDER.filter((c) => p.capabilities.includes(c)).map((c) => `${c}:${p.name}`));
}
const MIN_INTERVAL_MS = 1000;

/** Names of the providers that answer healthy now. */
async function healthyProviders(providers: readonly Provider[]): Promise<string[]> {
  const out: string[] = [];
  for (const p of providers) {
    const h = await p.health(AbortSignal.timeout(5000)).catch(() => ({ healthy: false }));
    if (h.healthy) out.push(p.name);
  }
  return out.sort();
}

/** One heartbeat's body (DESIGN §7): healthy providers, capabilities, capacity with the RPC URL, the gateway's counts. */
async function heartbeatBody(
  config: SbxConfig,
  providers: readonly Provider[],
  egress: WorkerEgress | undefined,
  rpcUrl: string | null,
  status: string,
) {
  const w = config.worker;
  const capacity: Record<string, unknown> = {
    max_sandboxes: config.defaults.max_sandboxes,
    max_sandboxes_per_owner: config.defaults.max_sandboxes_per_owner,
  };
  if (rpcUrl) capacity.rpc_url = rpcUrl;
  if (w.preview_domain) capacity.preview_domain = w.preview_domain;
  const capabilities = [...CAPABILITIES, ...providerCapabilities(providers), ...(egress?.capability ? [egress.capability] : [])];
  return {
    hostname: hostname(),
    status,
    providers: await healthyProviders(providers),
    capabilities,
    capacity,
    ...(egress && (egress.capability || egress.counts().allowed + egress.counts().denied > 0) ? { egress: egress.counts() } : {}),
  };
}

/** The bound secrets of this worker's sandboxes, fetched per sandbox from the control plane (DESIGN §15). */
function secretsFor(
  controlPlanes: string[],
  state: WorkerState,
  onControlPlane: ControlPlaneCall,
  logger: Logger,
  id: string,
): SecretSource {
  const secrets = workerSecretSource({
    controlPlanes,
    runs: (sandboxId) => state.getRuntime(sandboxId) !== null,
    fetch: async (sandboxId, signal) => {
      let got: WorkerSandboxSecrets | undefined;
      await onControlPlane('secrets fetch', async (client) => {
        got = await client.worker.sandboxSecrets(sandboxId, { signal });
      });
      return got!;
    },
  });
  if (!controlPlanes.every(secretsTransportOk))
    logger.warn(
      { worker_id: id },
      "worker.control_plane_url is plain http to a host that is not loopback: secrets bound to this worker's " +
        'sandboxes will not be injected (use https)',
    );
  return secrets;
}

export async function createWorker(config: SbxConfig, opts: WorkerOptions = {}): Promise<Worker> {
  const logger = opts.logger ?? createLogger({ level: config.logging.level, format: config.logging.format, secrets: secretValues(config) });
  const clock = opts.clock ?? systemClock;
  const home = opts.home ?? homedir();
  const w = config.worker;
  const id = (w.id ?? '').trim() || hostname();
  const controlPlanes = controlPlaneUrls(w.control_plane_url);
  const intervalMs = Math.max(MIN_INTERVAL_MS, parseDuration(w.heartbeat_interval, 'worker.heartbeat_interval'));
  const credentials = credentialsFrom(config);
  const creds0 = credentials();
  if (!creds0.shared_token && !creds0.tokens[id] && creds0.signing_keys.length === 0) {
    throw new Error(
      'the worker has no credential: set auth.worker_token (or --worker-token-file) or auth.worker_signing_key (or --signing-key-file)',
    );
  }

  const statePath = w.state_path
    ? w.state_path.replace(/^~(?=$|\/)/, home)
    : join(home, '.sbx', `worker-${id.replace(/[^A-Za-z0-9_.-]/g, '_')}.db`);
  const state: WorkerState = openWorkerState(statePath);
  let app: FastifyInstance | undefined;
  let providers: Provider[] = [];
  let egress: WorkerEgress | undefined;
  try {
    const installationId =
      state.getMeta('installation_id') ??
      (state.setMeta('installation_id', `wk${randomBytes(4).toString('hex')}`), state.getMeta('installation_id')!);
    const built = await buildProviders(config, installationId, new EventBus(clock), logger);
    providers = built.providers;
    const onControlPlane = controlPlaneCaller(controlPlanes, credentials, id, clock);
    // Filtered sandboxes (DESIGN §10): this worker's own gateway, with the rules the control plane sends.
    const denials = denialSender(() => egress, onControlPlane, logger, id);
    // Secrets (DESIGN §15): fetched per sandbox from the control plane.
    const secrets = secretsFor(controlPlanes, state, onControlPlane, logger, id);
    egress = await startWorkerEgress({
      secrets,
      config,
      providers,
      state,
      logger,
      onDenial: () => denials.send(),
      home,
      ...(opts.egressResolve ? { resolve: opts.egressResolve } : {}),
    });
    let draining = false;
    const rpc = w.listen_addr
      ? await rpcServer(config, {
          workerId: id,
          credentials,
          providers: new Map(providers.map((p) => [p.name, p])),
          spawnDefaults: {
            provider: built.defaultName,
            image: config.defaults.image,
            memory_mb: config.defaults.memory_mb,
            vcpus: config.defaults.vcpus,
          },
          state,
          clock,
          stagingDir: join(statePath + '.staging'),
          draining: () => draining,
          drain: () => void (draining = true),
          log: logger,
          previewDomain: w.preview_domain ?? '',
          maxSandboxes: config.defaults.max_sandboxes,
          maxExecOutputBytes: Math.floor(config.defaults.max_exec_output_mb * 1024 * 1024),
        })
      : undefined;
    app = rpc?.app;
    let rpcUrl: string | null = rpc?.url ?? null;

    const heartbeat = async (status?: string) => {
      const body = await heartbeatBody(config, providers, egress, rpcUrl, status ?? (draining ? 'draining' : 'online'));
      await onControlPlane('heartbeat', (client) => client.worker.heartbeat(body, { signal: AbortSignal.timeout(10_000) }));
    };
    const beats = heartbeatLoop(() => heartbeat(), intervalMs, logger, id);
    let stopped = false;
    let started = false;

    return {
      id,
      installationId,
      get rpcUrl() {
        return rpcUrl;
      },
      controlPlane: controlPlanes.join(','),
      providers: providers.map((p) => p.name),
      logger,
      secrets,
      heartbeat: () => heartbeat(),
      draining: () => draining,
      async start() {
        if (rpc) {
          const { host, port } = rpc.listen;
          await rpc.app.listen({ host, port });
          const addr = rpc.app.server.address();
          if (port === 0 && typeof addr === 'object' && addr && !w.advertise_url) rpcUrl = rpcUrl!.replace(/:0$/, `:${addr.port}`);
        }
        await heartbeat();
        started = true;
        beats.start();
      },
      async stop() {
        if (stopped) return;
        draining = true;
        stopped = true;
        beats.stop();
        denials.stop();
        // A worker that served says it is draining; a `--once` run never announced itself as running.
        if (started) await heartbeat('draining').catch((err: unknown) => logger.warn({ worker_id: id }, (err as Error).message));
        if (rpc) await drainRpc(rpc.app);
        // The last denials, then the gateway (its network and host rules stay while filtered containers run).
        await Promise.race([denials.flush(), new Promise((r) => setTimeout(r, 3_000).unref())]);
        await egress?.close().catch(() => undefined);
        await Promise.allSettled(providers.map((p) => p.close?.()));
        state.close();
      },
    };
  } catch (err) {
    await app?.close().catch(() => undefined);
    await egress?.close().catch(() => undefined);
    await Promise.allSettled(providers.map((p) => p.close?.()));
    state.close();
    throw err;
  }
}
