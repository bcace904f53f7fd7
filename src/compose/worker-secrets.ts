/**
 * A worker's SecretSource (DESIGN.md §15): the bound secrets of a sandbox this worker runs, fetched
 * from the control plane (`GET /api/v1/worker/sandboxes/{id}/secrets`) only over TLS or to a
 * loopback control plane, cached at most 1 s in memory, never written anywhere. Fails closed: a
 * fetch that fails, or a control plane reachable only in clear, throws.
 */
import type { WorkerSandboxSecrets } from '../client/types.js';
import { isLoopbackHost } from '../config/advertise.js';
import { parseRule } from '../core/network/rules.js';
import type { BoundSecret, SecretSource } from '../core/secrets/port.js';

const CACHE_MS = 1_000;

/** Whether values may be fetched from `url`: https, or http to a loopback host. */
export function secretsTransportOk(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || (u.protocol === 'http:' && isLoopbackHost(u.hostname));
  } catch {
    return false;
  }
}

export interface WorkerSecretDeps {
  /** The control plane URLs the worker uses. */
  controlPlanes: readonly string[];
  /** True when this worker runs the sandbox now (its state has the runtime). */
  runs(sandboxId: string): boolean;
  /** One fetch from a control plane (the worker's credentials, its failover). */
  fetch(sandboxId: string, signal: AbortSignal): Promise<WorkerSandboxSecrets>;
}

export function workerSecretSource(deps: WorkerSecretDeps): SecretSource {
  const cache = new Map<string, { at: number; bound: Promise<readonly BoundSecret[]> }>();
  const plain = deps.controlPlanes.filter((u) => !secretsTransportOk(u));
  const load = async (sandboxId: string, signal?: AbortSignal): Promise<readonly BoundSecret[]> => {
    if (!deps.runs(sandboxId)) return [];
    if (plain.length > 0)
      throw new Error(
        `secret values are fetched only over TLS: worker.control_plane_url ${plain.join(', ')} ` +
          'is plain http to a host that is not loopback',
      );
    const timeout = AbortSignal.timeout(10_000);
    const body = await deps.fetch(sandboxId, signal ? AbortSignal.any([signal, timeout]) : timeout);
    return body.secrets.map((s) => ({
      name: s.name,
      placeholder: s.placeholder,
      value: s.value,
      hosts: s.hosts.map((h) => parseRule(h)),
      allowPlainHttp: s.allow_plain_http,
    }));
  };
  return {
    forSandbox(sandboxId, signal) {
      const now = performance.now();
      const hit = cache.get(sandboxId);
      if (hit && now - hit.at < CACHE_MS) return hit.bound;
      for (const [k, v] of cache) if (now - v.at >= CACHE_MS) cache.delete(k);
      const bound = load(sandboxId, signal);
      cache.set(sandboxId, { at: now, bound });
      bound.catch(() => cache.delete(sandboxId));
      return bound;
    },
  };
}
