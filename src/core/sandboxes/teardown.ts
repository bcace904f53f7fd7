import { isAbortError, isSbxError, SbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { reportProviderFailure } from '../events/failures.js';
import type { ProviderRegistry } from '../providers/registry.js';
import type { Clock, Provider, SandboxRecord, SandboxStore } from '../ports/index.js';
import type { RuntimeLocator } from '../scheduler/locator.js';

interface TeardownDeps {
  store: SandboxStore;
  bus: EventBus;
  clock: Clock;
  providers: ProviderRegistry;
  locator: RuntimeLocator;
}

/** Bound on a remote worker's destroy. */
const REMOTE_DESTROY_TIMEOUT_MS = 60_000;

/** How a runtime's destroy is retried before the caller hears of a failure. */
export interface TeardownRetry {
  /** Tries of the provider's destroy in all (default 4). */
  attempts: number;
  /** Wait before the second try; doubles each time (default 250 ms). */
  backoffMs: number;
  /** Bound on one try (default 60 s). */
  attemptTimeoutMs: number;
  /** No new try starts after this long (default 90 s): a wedged engine fails the destroy in bounded time. */
  totalMs: number;
}

const DEFAULT_RETRY: TeardownRetry = { attempts: 4, backoffMs: 250, attemptTimeoutMs: 60_000, totalMs: 90_000 };
/** Bound on the "is it gone already?" probe between tries. */
const STATUS_TIMEOUT_MS = 10_000;

/**
 * Destroys sandboxes: one teardown per sandbox at a time (a second destroy of the same sandbox
 * joins the one under way), the provider's destroy retried with backoff, a runtime already gone
 * taken as destroyed. While a teardown runs, operations on the sandbox that fail answer
 * `not_found` instead of a provider failure (runtime-guard asks `destroying`).
 *
 * When every try fails the caller gets the error, but the sandbox is not abandoned: its expiry is
 * moved to now (persisted, so reads answer 404 at once and a restart keeps it), and the reaper's
 * next pass, which tears down every sandbox past its TTL, tries again until the runtime is gone.
 */
export class Teardowns {
  private readonly running = new Map<string, Promise<void>>();
  /** Why a sandbox whose teardown was left to the reaper is going, so the reaper reports that reason. */
  private readonly leftToReaper = new Map<string, string>();

  constructor(
    private readonly deps: TeardownDeps,
    private readonly retry: TeardownRetry = DEFAULT_RETRY,
    /** After a sandbox is marked destroyed (a fork's image may go with its last fork); never fails the destroy. */
    private readonly afterDestroy?: (rec: SandboxRecord) => Promise<void>,
  ) {}

  /** True while a teardown of this sandbox runs in this process. */
  destroying(id: string): boolean {
    return this.running.has(id);
  }

  /**
   * Tears the runtime down, then marks the record destroyed and publishes; joins a teardown already
   * under way. `retry: false` tries once (the reaper, which comes back on its next pass anyway).
   */
  run(rec: SandboxRecord, reason: string, opts: { retry?: boolean } = {}): Promise<void> {
    const current = this.running.get(rec.id);
    if (current !== undefined) return current;
    const p = this.teardown(rec, reason, opts.retry !== false)
      .then(() => (rec.fork ? this.afterDestroy?.(rec).catch(() => undefined) : undefined))
      .finally(() => this.running.delete(rec.id));
    this.running.set(rec.id, p);
    return p;
  }

  private async teardown(rec: SandboxRecord, requested: string, retry: boolean): Promise<void> {
    const { store, bus, clock, providers } = this.deps;
    const reason = this.leftToReaper.get(rec.id) ?? requested;
    const owner = rec.owner_id ?? undefined;
    if (!this.deps.locator.isLocal(rec)) return this.teardownRemote(rec, reason);
    // A gone record on an unconfigured provider has nothing left this server could tear down.
    if (rec.runtime_id && providers.has(rec.provider)) {
      try {
        await this.destroyRuntime(providers.get(rec.provider), rec.runtime_id, retry ? this.retry.attempts : 1);
      } catch (err) {
        const e = isSbxError(err) ? err : new SbxError('provider_error', `destroy failed on provider ${rec.provider}`);
        // Owner set so the stream's ownership filter keeps other tenants' sandbox ids private.
        reportProviderFailure(
          bus,
          { sandbox_id: rec.id, owner_id: owner, provider: rec.provider },
          { operation: 'destroy', code: e.code, message: e.message },
        );
        await this.leaveToReaper(rec, reason);
        throw e;
      }
    }
    this.leftToReaper.delete(rec.id);
    const wasLive = rec.state !== 'destroyed';
    await store.updateSandbox(rec.id, { state: 'destroyed', updated_at: clock.now().toISOString() });
    await this.deps.locator.leases.releaseLocal(rec);
    if (wasLive) {
      bus.publish({ type: 'sandbox.destroyed', sandbox_id: rec.id, owner_id: owner, worker_id: rec.worker_id, data: { reason } });
    }
  }

  /**
   * A remote sandbox (spec 4.11 rule 7): the owning worker destroys the runtime with the stored
   * lease, then the record is destroyed and the lease released. A worker that cannot be reached
   * fails the destroy (503) and changes nothing; a worker deleted from the registry leaves nothing
   * to call, so the record is destroyed and the lease released.
   */
  private async teardownRemote(rec: SandboxRecord, reason: string): Promise<void> {
    const { store, bus, clock, locator } = this.deps;
    const owner = rec.owner_id ?? undefined;
    const worker = await locator.workerOf(rec);
    if (worker && rec.runtime_id && rec.state !== 'destroyed') {
      try {
        await locator.remoteProvider(worker, rec).destroy(rec.runtime_id, AbortSignal.timeout(REMOTE_DESTROY_TIMEOUT_MS));
      } catch (err) {
        const e = isSbxError(err) ? err : new SbxError('provider_error', `destroy failed on worker ${rec.worker_id}`);
        if (!(isSbxError(err) && err.code === 'not_found')) {
          reportProviderFailure(
            bus,
            { sandbox_id: rec.id, owner_id: owner, worker_id: rec.worker_id, provider: rec.provider },
            { operation: 'destroy', code: e.code, message: e.message },
          );
          throw e;
        }
      }
    }
    const wasLive = rec.state !== 'destroyed';
    await store.updateSandbox(rec.id, { state: 'destroyed', updated_at: clock.now().toISOString() });
    await locator.leases.release(rec).catch(() => false);
    if (wasLive)
      bus.publish({ type: 'sandbox.destroyed', sandbox_id: rec.id, owner_id: owner, worker_id: rec.worker_id, data: { reason } });
  }

  /** The provider's destroy, retried with backoff; a runtime the provider reports missing is destroyed. */
  private async destroyRuntime(provider: Provider, runtimeId: string, attempts: number): Promise<void> {
    const { backoffMs, attemptTimeoutMs, totalMs } = this.retry;
    const started = performance.now();
    for (let attempt = 1; ; attempt++) {
      try {
        await provider.destroy(runtimeId, AbortSignal.timeout(attemptTimeoutMs));
        return;
      } catch (err) {
        if (await this.gone(provider, runtimeId)) return;
        const wait = backoffMs * 2 ** (attempt - 1);
        if (attempt >= Math.max(1, attempts) || performance.now() - started + wait > totalMs) throw err;
        if (!isAbortError(err) && isSbxError(err) && err.code === 'bad_request') throw err;
      }
      await new Promise((r) => setTimeout(r, backoffMs * 2 ** (attempt - 1)));
    }
  }

  private async gone(provider: Provider, runtimeId: string): Promise<boolean> {
    try {
      return (await provider.status(runtimeId, AbortSignal.timeout(STATUS_TIMEOUT_MS))) === 'missing';
    } catch {
      return false;
    }
  }

  /** Leaves a failed teardown to the reaper: the sandbox's expiry becomes now, which the reaper acts on. */
  private async leaveToReaper(rec: SandboxRecord, reason: string): Promise<void> {
    this.leftToReaper.set(rec.id, reason);
    if (rec.state === 'destroyed') return;
    const now = this.deps.clock.now();
    if (Date.parse(rec.expires_at) <= now.getTime()) return;
    await this.deps.store.updateSandbox(rec.id, { expires_at: now.toISOString(), updated_at: now.toISOString() }).catch(() => undefined);
  }
}
