import { isAbortError, isSbxError } from '../errors.js';
import type { ExecEvent, ExecSpec, Provider } from '../ports/index.js';
import { isProviderFailure, RUNTIME_OPERATIONS, type OperationStats } from './operations.js';

/** Provider methods measured, with the operation name they are reported under. */
const MEASURED: Record<string, string> = { spawn: 'spawn', destroy: 'destroy', ...RUNTIME_OPERATIONS };

const now = () => globalThis.performance.now();

/**
 * Wraps a provider so every runtime operation lands in `stats` (latency, success, failure).
 * A Proxy keeps provider-specific extras (preview addresses, …) reachable; a cancel by the
 * caller's own signal is not counted as anything.
 */
export function instrumentProvider<P extends Provider>(provider: P, stats: OperationStats): P {
  const name = provider.name;
  const cache = new Map<PropertyKey, unknown>();
  return new Proxy(provider, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      const hit = cache.get(prop);
      if (hit) return hit;
      let wrapped: unknown;
      if (prop === 'exec') {
        wrapped = (runtimeId: string, spec: ExecSpec, signal: AbortSignal) =>
          measureExec(stats, name, signal, () => (value as Provider['exec']).call(target, runtimeId, spec, signal));
      } else if (typeof prop === 'string' && Object.hasOwn(MEASURED, prop)) {
        const operation = MEASURED[prop]!;
        wrapped = async (...args: unknown[]) => {
          const started = now();
          try {
            const result: unknown = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
            stats.record({ operation, provider: name, ok: true, latency_ms: now() - started });
            return result;
          } catch (err) {
            const signal = args.find((a): a is AbortSignal => a instanceof AbortSignal);
            if (!(signal?.aborted && isAbortError(err))) {
              const ok = !isProviderFailure(err);
              stats.record({ operation, provider: name, ok, latency_ms: now() - started, error_code: errorCode(err) });
            }
            throw err;
          }
        };
      } else {
        // Private class fields need the real object as `this`.
        wrapped = (value as (...a: unknown[]) => unknown).bind(target);
      }
      cache.set(prop, wrapped);
      return wrapped;
    },
  });
}

function measureExec(
  stats: OperationStats,
  provider: string,
  signal: AbortSignal,
  start: () => AsyncIterable<ExecEvent>,
): AsyncIterable<ExecEvent> {
  return {
    // A consumer that stops early (client went away) is a cancel: nothing is recorded.
    [Symbol.asyncIterator]: async function* () {
      const started = now();
      try {
        for await (const ev of start()) yield ev;
      } catch (err) {
        if (!(signal.aborted && isAbortError(err))) {
          stats.record({
            operation: 'exec',
            provider,
            ok: !isProviderFailure(err),
            latency_ms: now() - started,
            error_code: errorCode(err),
          });
        }
        throw err;
      }
      stats.record({ operation: 'exec', provider, ok: true, latency_ms: now() - started });
    },
  };
}

function errorCode(err: unknown): string {
  return isSbxError(err) ? err.code : 'provider_error';
}
