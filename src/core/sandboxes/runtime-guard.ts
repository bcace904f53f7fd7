import { isAbortError, isSbxError, notFound, type SbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { reportExecProviderFault, reportProviderFailure } from '../events/failures.js';
import { isProviderFailure, RUNTIME_OPERATIONS } from '../observability/operations.js';
import type { Clock, ExecSpec, OpenedFile, Provider, SandboxRecord, SandboxStore } from '../ports/index.js';

interface GuardDeps {
  store: SandboxStore;
  bus: EventBus;
  clock: Clock;
  /** True while this process tears the sandbox down (SandboxService.destroying). */
  destroying?: (id: string) => boolean;
}

const GONE_ERRORS = new WeakSet<object>();

/** The answer to an operation that lost a race with the sandbox's destroy: the sandbox is gone. */
function sandboxGone(id: string): SbxError {
  const e = notFound(`sandbox ${id} not found`);
  GONE_ERRORS.add(e);
  return e;
}

/** True for the not_found of an operation whose sandbox was destroyed under it (not a missing path). */
export function isSandboxGone(err: unknown): boolean {
  return typeof err === 'object' && err !== null && GONE_ERRORS.has(err);
}

/**
 * The provider as seen by one running sandbox's exec/file/log operations. An operation that fails
 * while the sandbox is being destroyed, or once it is destroyed or expired, answers `not_found`
 * (DESIGN.md §3: operations on a destroyed sandbox are 404) and changes nothing. Otherwise it
 * publishes `provider.failed` (and `operation.failed` for non-exec operations: exec reports its
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
              if (signal.aborted && isAbortError(err)) throw err;
              throw await failed('exec', err);
            }
          },
        });
      }
      if (typeof prop === 'string' && Object.hasOwn(RUNTIME_OPERATIONS, prop)) {
        return async (...args: unknown[]) => {
          const operation = RUNTIME_OPERATIONS[prop]!;
          let result: unknown;
          try {
            result = await (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          } catch (err) {
            throw await failed(operation, err);
          }
          // A streamed read fails while its body is taken: the same answer then.
          if (prop === 'openFile') return guardedBody(result as OpenedFile, (err) => failed(operation, err));
          return result;
        };
      }
      return (value as (...a: unknown[]) => unknown).bind(target);
    },
  });
}

/** The opened file with failures while its body is read mapped like the open's own. */
function guardedBody(file: OpenedFile, failed: (err: unknown) => Promise<unknown>): OpenedFile {
  const body = file.body;
  return {
    ...file,
    body: {
      [Symbol.asyncIterator]() {
        const it = body[Symbol.asyncIterator]();
        return {
          async next() {
            try {
              return await it.next();
            } catch (err) {
              if (isAbortError(err)) throw err;
              throw await failed(err);
            }
          },
          async return() {
            await it.return?.();
            return { done: true as const, value: undefined };
          },
        };
      },
    },
  };
}

/** True when the sandbox is being destroyed here, or its record says it is gone. */
async function goneOrGoing(deps: GuardDeps, id: string): Promise<boolean> {
  if (deps.destroying?.(id)) return true;
  const current = await deps.store.getSandbox(id).catch(() => undefined);
  if (current === undefined) return false; // the store cannot answer: judge by the error alone
  if (current === null || current.state === 'destroyed' || current.state === 'expired') return true;
  if (Date.parse(current.expires_at) <= deps.clock.now().getTime()) return true;
  return deps.destroying?.(id) ?? false;
}

/** Handles a failed operation and returns the error the caller gets. */
async function runtimeFailed(
  deps: GuardDeps,
  rec: SandboxRecord,
  provider: Provider,
  runtimeId: string,
  operation: string,
  err: unknown,
): Promise<unknown> {
  if (await goneOrGoing(deps, rec.id)) return sandboxGone(rec.id);
  await judgeRuntime(deps, rec, provider, runtimeId, operation, err);
  // The destroy may have started while the runtime was being judged.
  if (deps.destroying?.(rec.id)) return sandboxGone(rec.id);
  return err;
}

async function judgeRuntime(
  deps: GuardDeps,
  rec: SandboxRecord,
  provider: Provider,
  runtimeId: string,
  operation: string,
  err: unknown,
): Promise<void> {
  const code = isSbxError(err) ? err.code : 'provider_error';
  const providerFault = isProviderFailure(err);
  // A missing path is the caller's mistake, unless the whole runtime is what went missing.
  if (!providerFault && code !== 'not_found') return;
  const common = { sandbox_id: rec.id, owner_id: rec.owner_id ?? undefined, worker_id: rec.worker_id };
  if (providerFault) {
    const message = isSbxError(err) ? err.message : `${operation} failed on provider ${rec.provider}`;
    const subject = { ...common, provider: rec.provider };
    if (operation === 'exec') reportExecProviderFault(deps.bus, subject, { code, message });
    else reportProviderFailure(deps.bus, subject, { operation, code, message });
  }
  let status: string;
  try {
    status = await provider.status(runtimeId, AbortSignal.timeout(5000));
  } catch {
    return; // The backend is down, not the sandbox: provider health reports that.
  }
  if (status === 'running' || status === 'paused') return;
  // Only a sandbox still running moves: a concurrent destroy also makes the runtime vanish.
  if (deps.destroying?.(rec.id)) return;
  const current = await deps.store.getSandbox(rec.id).catch(() => null);
  if (!current || current.state !== 'running' || deps.destroying?.(rec.id)) return;
  const updated = await deps.store.updateSandbox(rec.id, { state: 'error', updated_at: deps.clock.now().toISOString() }).catch(() => null);
  if (!updated) return;
  deps.bus.publish({ type: 'sandbox.error', ...common, data: { provider: rec.provider, operation, reason: `runtime ${status}` } });
}
