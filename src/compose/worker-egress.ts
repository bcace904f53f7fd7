/**
 * Egress enforcement on a worker (DESIGN.md §10): the same network, firewall, refusing DNS and
 * gateway as in `serve`, with the rules the control plane sent (`worker.spawn`, then each
 * `worker.egress_update`) kept in the worker's state. Verdicts and secret injections (§15) are
 * counted (cumulative, kept in the state across restarts, sent with each heartbeat); denials wait in a bounded queue for
 * `POST /api/v1/worker/events`.
 */
import type { Logger } from 'pino';
import type { WorkerEventsRequest } from '../client/types.js';
import type { SbxConfig } from '../config/index.js';
import type { EgressCounts, Provider } from '../core/ports/index.js';
import type { WorkerState } from '../core/scheduler/worker-state-port.js';
import { startEgress, type EgressHandle } from './egress.js';
import type { SecretSource } from '../core/secrets/port.js';

type Denial = WorkerEventsRequest['events'][number];

/** Denials held while the control plane is away; the oldest go first (counted). */
const MAX_QUEUED = 10_000;
/** Denials per `POST /api/v1/worker/events`. */
const BATCH = 500;

export interface WorkerEgress {
  /** `egress:<provider>` for the heartbeat's capabilities when filtered sandboxes are enforced here; else null. */
  readonly capability: string | null;
  /** Verdicts so far, cumulative across restarts of this worker. */
  counts(): EgressCounts;
  /** Denials dropped because the queue was full. */
  readonly dropped: number;
  /** Sends the queued denials in batches; those not sent stay queued for the next try. */
  flush(send: (body: WorkerEventsRequest) => Promise<void>): Promise<void>;
  /** Stops the gateway (its network and host rules stay while filtered containers remain). */
  close(): Promise<void>;
}

export interface WorkerEgressDeps {
  config: SbxConfig;
  providers: readonly Provider[];
  state: WorkerState;
  logger: Logger;
  /** Name → addresses for the gateway (tests inject one). */
  resolve?(name: string): Promise<string[]>;
  /** A denial was queued (the worker sends soon). */
  onDenial?(): void;
  /** Home of the worker's data dir (`<home>/.sbx`): its own egress CA lives there (DESIGN §15). */
  home?: string;
  /** Bound secrets of this worker's sandboxes, fetched from the control plane (DESIGN.md §15). */
  secrets?: SecretSource;
}

const num = (text: string | null) => {
  const n = Number(text ?? '0');
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
};

export async function startWorkerEgress(deps: WorkerEgressDeps): Promise<WorkerEgress> {
  const { state } = deps;
  const counts = {
    allowed: num(state.getMeta('egress_allowed')),
    denied: num(state.getMeta('egress_denied')),
    injections: num(state.getMeta('egress_injections')),
  };
  let queue: Denial[] = [];
  let dropped = 0;
  let saved = { ...counts };
  const save = () => {
    if (saved.allowed === counts.allowed && saved.denied === counts.denied && saved.injections === counts.injections) return;
    state.setMeta('egress_allowed', String(counts.allowed));
    state.setMeta('egress_denied', String(counts.denied));
    state.setMeta('egress_injections', String(counts.injections));
    saved = { ...counts };
  };
  let handle: EgressHandle | null = null;
  handle = await startEgress({
    config: deps.config,
    providers: deps.providers,
    logger: deps.logger,
    ...(deps.home ? { home: deps.home } : {}),
    ...(deps.resolve ? { resolve: deps.resolve } : {}),
    ...(deps.secrets ? { secrets: deps.secrets } : {}),
    rules: async (id) => {
      const rt = state.getRuntime(id);
      if (!rt || rt.network !== 'filtered') return null;
      return rt.egress ?? { allow: [], deny: [] };
    },
    // Requests sent on with a secret injected (DESIGN §15): counted with the verdicts, sent in the heartbeat.
    onInjection: () => void counts.injections++,
    onVerdict: (v) => {
      if (v.verdict === 'allowed') return void counts.allowed++;
      counts.denied++;
      if (!v.sandbox_id) return;
      if (queue.length >= MAX_QUEUED) {
        queue.shift();
        dropped++;
      }
      queue.push({
        type: 'network.denied',
        sandbox_id: v.sandbox_id,
        host: v.host.slice(0, 512),
        port: v.port,
        reason: v.reason ?? 'no_rule',
      });
      deps.onDenial?.();
    },
  });
  const docker = deps.providers.find((p) => p.name === 'docker');
  return {
    capability: handle && handle.reason === null && docker ? `egress:${docker.name}` : null,
    counts: () => {
      save();
      return { ...counts };
    },
    get dropped() {
      return dropped;
    },
    async flush(send) {
      while (queue.length > 0) {
        const batch = queue.slice(0, BATCH);
        await send({ events: batch });
        // Sent: those go (new ones may have joined, and old ones been dropped, meanwhile).
        const sent = new Set(batch);
        queue = queue.filter((d) => !sent.has(d));
      }
    },
    async close() {
      save();
      await handle?.close();
    },
  };
}
