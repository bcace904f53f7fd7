/**
 * Failure events in one place (spec Part 6): a provider or worker operation that failed publishes
 * `provider.failed` with the operation, code and message, then `operation.failed` — or, for exec,
 * `exec.failed` naming the program and then `operation.failed`. Spawn, destroy, the runtime guard
 * and exec all report through here, so the shapes cannot drift apart.
 */
import type { EventBus } from './bus.js';

export interface FailureSubject {
  sandbox_id: string;
  owner_id?: string | null;
  worker_id?: string;
  provider: string;
}

export interface Failure {
  operation: string;
  code: string;
  message: string;
}

const common = (s: FailureSubject) => ({
  sandbox_id: s.sandbox_id,
  owner_id: s.owner_id ?? undefined,
  ...(s.worker_id !== undefined ? { worker_id: s.worker_id } : {}),
});

/** `provider.failed` then `operation.failed`: a provider (or remote worker) call failed. */
export function reportProviderFailure(bus: EventBus, s: FailureSubject, f: Failure): void {
  bus.publish({
    type: 'provider.failed',
    ...common(s),
    data: { provider: s.provider, operation: f.operation, code: f.code, message: f.message },
  });
  bus.publish({ type: 'operation.failed', ...common(s), data: { operation: f.operation, provider: s.provider, code: f.code } });
}

/**
 * `provider.failed` alone: the runtime guard saw a provider fault inside an exec, whose own
 * failure (`exec.failed`, `operation.failed`) the exec reports once it ends.
 */
export function reportExecProviderFault(bus: EventBus, s: FailureSubject, f: Omit<Failure, 'operation'>): void {
  bus.publish({
    type: 'provider.failed',
    ...common(s),
    data: { provider: s.provider, operation: 'exec', code: f.code, message: f.message },
  });
}

/** `exec.failed` (the program only: arguments and env may carry secrets) then `operation.failed`. */
export function reportExecFailure(bus: EventBus, s: FailureSubject, program: string, f: Omit<Failure, 'operation'>): void {
  bus.publish({ type: 'exec.failed', ...common(s), data: { program, code: f.code, message: f.message } });
  bus.publish({ type: 'operation.failed', ...common(s), data: { operation: 'exec', provider: s.provider, code: f.code } });
}
