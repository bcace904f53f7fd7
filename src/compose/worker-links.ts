/**
 * A worker's side of the control plane (DESIGN.md §7): its URLs (replicas tried in turn), its
 * credentials (files read again at each use), calls on it, the heartbeat loop and the batched
 * egress denials.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import { Client } from '../client/client.js';
import type { SbxConfig } from '../config/index.js';
import type { WorkerCredentials } from '../core/auth/settings.js';
import { AUD_CONTROL_PLANE, WORKER_SCOPES } from '../core/auth/worker-claims.js';
import type { Clock } from '../core/ports/index.js';
import { mintWorkerToken } from '../transports/shared/worker-auth.js';
import { authSettings } from './settings.js';
import type { WorkerEgress } from './worker-egress.js';

export type ControlPlaneCall = (what: string, call: (client: Client) => Promise<unknown>) => Promise<void>;

/** The worker's credentials; a token or key kept in a file is read again at each use (rotation). */
export function credentialsFrom(config: SbxConfig): () => WorkerCredentials {
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

/** `worker.control_plane_url`: several URLs (comma-separated) are replicas of one control plane, tried in turn (DESIGN §7). */
export function controlPlaneUrls(url: string | undefined): string[] {
  if (!url) throw new Error('worker.control_plane_url is required (--control-plane URL)');
  const controlPlanes = url
    .split(',')
    .map((u) => u.trim().replace(/\/+$/, ''))
    .filter((u) => u !== '');
  for (const u of controlPlanes) {
    if (!/^https?:\/\/[^\s/]+/.test(u)) throw new Error(`worker.control_plane_url: ${JSON.stringify(u)} is not an http(s) URL`);
  }
  return controlPlanes;
}

/** One call on the control plane: the one that answered last first, the others in turn when it does not. */
export function controlPlaneCaller(
  controlPlanes: string[],
  credentials: () => WorkerCredentials,
  id: string,
  clock: Clock,
): ControlPlaneCall {
  let current = 0;
  return async (what, call) => {
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
}

/** The heartbeat loop: one beat per interval, backing off after failures (never longer than the interval). */
export function heartbeatLoop(beat: () => Promise<void>, intervalMs: number, logger: Logger, id: string): { start(): void; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let failures = 0;
  const loop = () => {
    if (stopped) return;
    const wait = failures === 0 ? intervalMs : Math.min(intervalMs, 500 * 2 ** Math.min(failures, 10));
    timer = setTimeout(() => {
      beat()
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
    start: loop,
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}

/** Denials go out within about a second of the first in a quiet spell, in batches; a failed send keeps them queued. */
export function denialSender(
  egress: () => WorkerEgress | undefined,
  onControlPlane: ControlPlaneCall,
  logger: Logger,
  id: string,
): { send(): void; flush(): Promise<void>; stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  const flush = async (): Promise<void> => {
    timer = undefined;
    await egress()
      ?.flush((body) => onControlPlane('egress events', (client) => client.worker.events(body, { signal: AbortSignal.timeout(10_000) })))
      .catch((err: unknown) => {
        logger.warn({ worker_id: id }, (err as Error).message);
        send();
      });
  };
  const send = () => {
    if (timer || stopped) return;
    timer = setTimeout(() => void flush(), 1000);
    timer.unref();
  };
  return {
    send,
    flush,
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
