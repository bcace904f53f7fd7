/**
 * The composition root of `sbx worker` (DESIGN.md §7): its providers, its own state, its RPC
 * server and the heartbeat loop to the control plane. It never touches the control plane's
 * database; runtimes outlive the process (the control plane owns them), so a restarted worker
 * picks them up from its state.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { openWorkerState } from '../adapters/stores/worker-state/index.js';
import { systemClock } from '../adapters/system/clock-ids.js';
import { Client } from '../client/client.js';
import type { SbxConfig } from '../config/index.js';
import { secretValues } from '../config/index.js';
import type { WorkerCredentials } from '../core/auth/settings.js';
import { AUD_CONTROL_PLANE, WORKER_SCOPES } from '../core/auth/worker-claims.js';
import { parseDuration } from '../core/duration.js';
import { EventBus } from '../core/events/bus.js';
import type { Clock, Provider } from '../core/ports/index.js';
import type { WorkerState } from '../core/scheduler/worker-state-port.js';
import { createLogger } from '../log/logger.js';
import { mintWorkerToken } from '../transports/shared/worker-auth.js';
import { buildRpcApp, callsInFlight } from '../transports/worker-rpc/server/app.js';
import { buildProviders } from './providers.js';
import { authSettings } from './settings.js';
import { startWorkerEgress, type WorkerEgress } from './worker-egress.js';
import { secretsTransportOk, workerSecretSource } from './worker-secrets.js';
import type { SecretSource } from '../core/secrets/port.js';
import type { WorkerSandboxSecrets } from '../client/types.js';

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
const DRAIN_WAIT_MS = 30_000;

/** `host:port` → URL; a bare port means all interfaces. */
function listenParts(addr: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d+)$/.exec(addr.trim()) ?? /^()()(\d+)$/.exec(addr.trim());
  if (!m) throw new Error(`worker.listen_addr must be HOST:PORT, not ${JSON.stringify(addr)}`);
  const port = Number(m[3]);
  if (!(port >= 0 && port <= 65535)) throw new Error(`worker.listen_addr has an invalid port: ${JSON.stringify(addr)}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/** The worker's credentials; a token or key kept in a file is read again at each use (rotation). */
function credentialsFrom(config: SbxConfig): () => WorkerCredentials {
  const base = authSettings(config).worker;
  const a = config.auth;
  const fresh = (file: string | undefined, fallback: string) => {
    if (!file) return fallback;
    try {
      return readFileSync(file, 'utf8').trim();
    } catch {
      return fallback;
    }
  };
  return () => {
    const shared = fresh(a.worker_token_file, base.shared_token);
    const key = fresh(a.worker_signing_key_file, a.worker_signing_key ?? '');
    const keys = [...new Set([key, ...a.worker_signing_keys].filter((k) => k !== ''))];
    return { ...base, shared_token: shared, signing_keys: keys };
  };
}

export async function createWorker(config: SbxConfig, opts: WorkerOptions = {}): Promise<Worker> {
  const logger = opts.logger ?? createLogger({ level: config.logging.level, format: config.logging.format, secrets: secretValues(config) });
  const clock = opts.clock ?? systemClock;
  const home = opts.home ?? homedir();
  const w = config.worker;
  const id = (w.id ?? '').trim() || hostname();
  if (!w.control_plane_url) throw new Error('worker.control_plane_url is required (--control-plane URL)');
  // Several URLs (comma-separated): replicas of one control plane, tried in turn (DESIGN §7).
  const controlPlanes = w.control_plane_url
    .split(',')
    .map((u) => u.trim().replace(/\/+$/, ''))
    .filter((u) => u !== '');
  for (const u of controlPlanes) {
    if (!/^https?:\/\/[^\s/]+/.test(u)) throw new Error(`worker.control_plane_url: ${JSON.stringify(u)} is not an http(s) URL`);
  }
  const controlPlane = controlPlanes.join(',');
  let current = 0;
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
    // Filtered sandboxes (DESIGN §10): this worker's own gateway, with the rules the control plane sends.
    let sendDenials = () => undefined as void;
    // Secrets (DESIGN §15): fetched per sandbox from the control plane once it can be called (below).
    let fetchSecrets: (sandboxId: string, signal: AbortSignal) => Promise<WorkerSandboxSecrets> = () =>
      Promise.reject(new Error('the worker is starting'));
    const secrets = workerSecretSource({
      controlPlanes,
      runs: (sandboxId) => state.getRuntime(sandboxId) !== null,
      fetch: (sandboxId, signal) => fetchSecrets(sandboxId, signal),
    });
    if (!controlPlanes.every(secretsTransportOk))
      logger.warn(
        { worker_id: id },
        "worker.control_plane_url is plain http to a host that is not loopback: secrets bound to this worker's " +
          'sandboxes will not be injected (use https)',
      );
    egress = await startWorkerEgress({
      secrets,
      config,
      providers,
      state,
      logger,
      onDenial: () => sendDenials(),
      home,
      ...(opts.egressResolve ? { resolve: opts.egressResolve } : {}),
    });
    const byName = new Map(providers.map((p) => [p.name, p]));
    let draining = false;
    const tls = w.rpc_tls;
    let rpcUrl: string | null = null;
    if (w.listen_addr) {
      const { host, port } = listenParts(w.listen_addr);
      const read = (key: string, file: string | undefined) => {
        if (!file) throw new Error(`worker.rpc_tls.enabled needs worker.rpc_tls.${key}`);
        try {
          return readFileSync(file);
        } catch (err) {
          throw new Error(`worker.rpc_tls.${key}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
        }
      };
      const https = tls.enabled
        ? {
            cert: read('server_cert_file', tls.server_cert_file),
            key: read('server_key_file', tls.server_key_file),
            ...(tls.client_ca_file ? { ca: read('client_ca_file', tls.client_ca_file) } : {}),
          }
        : undefined;
      app = await buildRpcApp(
        {
          workerId: id,
          credentials,
          providers: byName,
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
        },
        https ? { https } : {},
      );
      rpcUrl = (
        w.advertise_url ||
        `${tls.enabled ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? hostname() : host}:${port}`
      ).replace(/\/+$/, '');
      (app as unknown as { sbxListen: { host: string; port: number } }).sbxListen = { host, port };
    }

    /** Names of the providers that answer healthy now. */
    const healthy = async () => {
      const out: string[] = [];
      for (const p of providers) {
        const h = await p.health(AbortSignal.timeout(5000)).catch(() => ({ healthy: false }));
        if (h.healthy) out.push(p.name);
      }
      return out.sort();
    };

    /** One call on the control plane: the one that answered last first, the others in turn when it does not. */
    const onControlPlane = async (what: string, call: (client: Client) => Promise<unknown>) => {
      const c = credentials();
      const token =
        c.tokens[id] ||
        (c.signing_keys[0]
          ? mintWorkerToken(c.signing_keys[0], { worker_id: id, aud: AUD_CONTROL_PLANE, scopes: [...WORKER_SCOPES] }, { now: clock.now() })
          : c.shared_token);
      const failures: string[] = [];
      for (let i = 0; i < controlPlanes.length; i++) {
        const at = (current + i) % controlPlanes.length;
        const client = new Client({ url: controlPlanes[at]!, worker: { id, token } });
        try {
          await call(client);
          current = at;
          return;
        } catch (err) {
          failures.push(`${controlPlanes[at]}: ${(err as Error).message}`);
        } finally {
          await client.close();
        }
      }
      throw new Error(`${what} failed: ${failures.join('; ')}`);
    };
    fetchSecrets = async (sandboxId, signal) => {
      let got: WorkerSandboxSecrets | undefined;
      await onControlPlane('secrets fetch', async (client) => {
        got = await client.worker.sandboxSecrets(sandboxId, { signal });
      });
      return got!;
    };

    const heartbeat = async (status?: string) => {
      const capacity: Record<string, unknown> = {
        max_sandboxes: config.defaults.max_sandboxes,
        max_sandboxes_per_owner: config.defaults.max_sandboxes_per_owner,
      };
      if (rpcUrl) capacity.rpc_url = rpcUrl;
      if (w.preview_domain) capacity.preview_domain = w.preview_domain;
      const capabilities = [...CAPABILITIES, ...providerCapabilities(providers), ...(egress?.capability ? [egress.capability] : [])];
      const body = {
        hostname: hostname(),
        status: status ?? (draining ? 'draining' : 'online'),
        providers: await healthy(),
        capabilities,
        capacity,
        ...(egress && (egress.capability || egress.counts().allowed + egress.counts().denied > 0) ? { egress: egress.counts() } : {}),
      };
      await onControlPlane('heartbeat', (client) => client.worker.heartbeat(body, { signal: AbortSignal.timeout(10_000) }));
    };

    // Denials go out within about a second of the first in a quiet spell, in batches; a failed send keeps them queued.
    let denialTimer: NodeJS.Timeout | undefined;
    const flushDenials = async () => {
      denialTimer = undefined;
      await egress
        ?.flush((body) => onControlPlane('egress events', (client) => client.worker.events(body, { signal: AbortSignal.timeout(10_000) })))
        .catch((err: unknown) => {
          logger.warn({ worker_id: id }, (err as Error).message);
          sendDenials();
        });
    };
    sendDenials = () => {
      if (denialTimer || stopped) return;
      denialTimer = setTimeout(() => void flushDenials(), 1000);
      denialTimer.unref();
    };

    let timer: NodeJS.Timeout | undefined;
    let stopped = false;
    let started = false;
    let failures = 0;
    const loop = () => {
      if (stopped) return;
      // Backoff after failures, never longer than the interval itself.
      const wait = failures === 0 ? intervalMs : Math.min(intervalMs, 500 * 2 ** Math.min(failures, 10));
      timer = setTimeout(() => {
        heartbeat()
          .then(() => (failures = 0))
          .catch((err: unknown) => {
            failures++;
            logger.warn({ worker_id: id, failures }, (err as Error).message);
          })
          .finally(loop);
      }, wait);
      timer.unref();
    };

    return {
      id,
      installationId,
      get rpcUrl() {
        return rpcUrl;
      },
      controlPlane,
      providers: providers.map((p) => p.name),
      logger,
      secrets,
      heartbeat: () => heartbeat(),
      draining: () => draining,
      async start() {
        if (app) {
          const { host, port } = (app as unknown as { sbxListen: { host: string; port: number } }).sbxListen;
          await app.listen({ host, port });
          const addr = app.server.address();
          if (port === 0 && typeof addr === 'object' && addr && !w.advertise_url) rpcUrl = rpcUrl!.replace(/:0$/, `:${addr.port}`);
        }
        await heartbeat();
        started = true;
        loop();
      },
      async stop() {
        if (stopped) return;
        const wasRunning = started;
        draining = true;
        stopped = true;
        if (timer) clearTimeout(timer);
        if (denialTimer) clearTimeout(denialTimer);
        // A worker that served says it is draining; a `--once` run never announced itself as running.
        if (wasRunning) await heartbeat('draining').catch((err: unknown) => logger.warn({ worker_id: id }, (err as Error).message));
        if (app) {
          // No new connections; the calls in flight finish (at most DRAIN_WAIT_MS), then every
          // connection goes: idle keep-alives and ones whose call already ended alike.
          const rpc = app;
          const closing = rpc.close();
          const deadline = performance.now() + DRAIN_WAIT_MS;
          while (callsInFlight(rpc) > 0 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
          rpc.server.closeAllConnections();
          await Promise.race([closing, new Promise((r) => setTimeout(r, 5_000).unref())]);
        }
        // The last denials, then the gateway (its network and host rules stay while filtered containers run).
        await Promise.race([flushDenials(), new Promise((r) => setTimeout(r, 3_000).unref())]);
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
