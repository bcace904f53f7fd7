import { isAbortError, isSbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { isProviderFailure, RUNTIME_OPERATIONS } from '../observability/operations.js';
import type { Clock, ExecSpec, Provider, SandboxRecord, Store } from '../ports.js';

interface GuardDeps {
  store: Store;
  bus: EventBus;
  clock: Clock;
}

/**
 * The provider as seen by one running sandbox's exec/file/log operations. When an operation fails
 * it publishes `provider.failed` (and `operation.failed` for non-exec operations: exec reports its
 * own), then asks the provider whether the runtime still exists; a missing or stopped runtime
 * moves the sandbox to `error` and publishes `sandbox.error` before the failure reaches the caller
 * (the reaper's next pass then tears it down: SandboxService.reap).
 */
export function guardRuntime(deps: GuardDeps, rec: SandboxRecord, provider: Provider): Provider {
  const runtimeId = rec.runtime_id;
  if (!runtimeId) return provider;
  const failed = (operation: string, err: unknown) => runtimeFailed(deps, rec, provider, runtimeId, operation, err);
  return new Proxy(provider, {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function') return value;
      if (prop === 'exec') {
        return (id: string, spec: ExecSpec, signal: AbortSignal) => ({
          [Symbol.asyncIterator]: async function* () {
            try {
              yield* (value as Provider['exec']).call(target, id, spec, signal);
            } catch (err) {
              if (!(signal.aborted && isAbortError(err))) await failed('exec', err);
              throw err;
            }
          },
        });
      }
      if (typeof prop === 'string' && Object.hasOwn(RUNTIME_OPERATIONS, prop)) {
        return async (...args: unknown[]) => {
          try {
            return await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          } catch (err) {
            await failed(RUNTIME_OPERATIONS[prop]!, err);
            throw err;
          }
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

async function runtimeFailed(deps: GuardDeps, rec: SandboxRecord, provider: Provider, runtimeId: string, operation: string, err: unknown): Promise<void> {
  const code = isSbxError(err) ? err.code : 'provider_error';
  const providerFault = isProviderFailure(err);
  // A missing path is the caller's mistake, unless the whole runtime is what went missing.
  if (!providerFault && code !== 'not_found') return;
  const common = { sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
  if (providerFault) {
    const message = isSbxError(err) ? err.message : `${operation} failed on provider ${rec.provider}`;
    deps.bus.publish({ type: 'provider.failed', ...common, data: { provider: rec.provider, operation, code, message } });
    if (operation !== 'exec') deps.bus.publish({ type: 'operation.failed', ...common, data: { operation, provider: rec.provider, code } });
  }
  let status: string;
  try {
    status = await provider.status(runtimeId, AbortSignal.timeout(5000));
  } catch {
    return; // The backend is down, not the sandbox: provider health reports that.
  }
  if (status === 'running') return;
  // Only a sandbox still running moves: a concurrent destroy also makes the runtime vanish.
  const current = await deps.store.getSandbox(rec.id).catch(() => null);
  if (!current || current.state !== 'running') return;
  const updated = await deps.store.updateSandbox(rec.id, { state: 'error', updated_at: deps.clock.now().toISOString() }).catch(() => null);
  if (!updated) return;
  deps.bus.publish({ type: 'sandbox.error', ...common, data: { provider: rec.provider, operation, reason: `runtime ${status}` } });
}
