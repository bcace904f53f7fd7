/**
 * The runtime resolver: a caller's running sandbox with the Provider that reaches it, for exec,
 * files, logs, processes, snapshots and forks. A paused sandbox is resumed first (DESIGN.md §16);
 * the provider is guarded (runtime-guard.ts) and comes from the locator, local or remote alike.
 */
import { notFound, SbxError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Clock, Provider, SandboxRecord, SandboxStore } from '../ports/index.js';
import type { RuntimeLocator } from '../scheduler/locator.js';
import type { Caller } from './caller.js';
import { providerNotConfigured, type SandboxLookup } from './lookup.js';
import type { PauseService } from './pause.js';
import { guardRuntime } from './runtime-guard.js';

export interface RuntimeDeps {
  store: SandboxStore;
  bus: EventBus;
  clock: Clock;
  locator: Pick<RuntimeLocator, 'provider'>;
}

export interface ResolvedRuntime {
  rec: SandboxRecord;
  provider: Provider;
  runtimeId: string;
}

/** What resolves a sandbox id to its runtime; child services receive this function, not the service. */
export type ResolveRuntime = (id: string, caller: Caller, opts?: { resume?: boolean }) => Promise<ResolvedRuntime>;

export class RuntimeResolver {
  constructor(
    private readonly deps: RuntimeDeps,
    private readonly lookup: SandboxLookup,
    private readonly pauses: Pick<PauseService, 'ensureRunning' | 'activity'>,
  ) {}

  /**
   * A running sandbox with its provider. A paused one is resumed first, unless `resume` is false
   * (internal followers: then `unavailable`); the call counts as activity for auto-pause.
   */
  async resolve(id: string, caller: Caller, opts: { resume?: boolean } = {}): Promise<ResolvedRuntime> {
    let rec = await this.lookup.get(id, caller);
    if (this.lookup.destroying(id)) throw notFound(`sandbox ${id} not found`);
    if (this.lookup.stranded(rec)) throw providerNotConfigured(rec);
    if (opts.resume !== false) {
      rec = await this.pauses.ensureRunning(rec);
      this.pauses.activity.touch(id);
    }
    if (rec.state !== 'running' || !rec.runtime_id) {
      throw new SbxError('unavailable', `sandbox ${id} is ${rec.state}, not running`);
    }
    // Guarded: a failure publishes provider.failed, and a vanished runtime moves the sandbox to
    // `error`; a failure while the sandbox is being destroyed (or after) answers not_found.
    const guard = { store: this.deps.store, bus: this.deps.bus, clock: this.deps.clock, destroying: this.lookup.destroying };
    return { rec, provider: guardRuntime(guard, rec, await this.deps.locator.provider(rec)), runtimeId: rec.runtime_id };
  }
}
