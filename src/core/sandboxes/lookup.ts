/**
 * The sandbox a caller may reach (spec 3.1; DESIGN.md §3 "Expiry", "Auth"): the ownership rule, the
 * TTL that makes a row gone for every read at once whatever the reaper's timing, the teardown under
 * way, and the provider this server does not run. The child services of SandboxService get it
 * instead of the service.
 */
import { notFound, SbxError, unavailable } from '../errors.js';
import type { Clock, SandboxRecord, SandboxStore } from '../ports/index.js';
import type { RuntimeLocator } from '../scheduler/locator.js';
import type { Caller, OwnerRule } from './caller.js';

export const GONE = new Set(['destroyed', 'expired']);

export interface LookupDeps {
  store: Pick<SandboxStore, 'getSandbox'>;
  clock: Clock;
  locator: Pick<RuntimeLocator, 'providerMissing'>;
  /** Operator-facing warnings that no caller receives. */
  warn?: (fields: Record<string, unknown>, message: string) => void;
}

export class SandboxLookup {
  /** Sandboxes already reported as stranded, so the reaper warns once, not every pass. */
  private readonly warnedStranded = new Set<string>();

  constructor(
    private readonly deps: LookupDeps,
    private readonly ownerRule: OwnerRule,
    /** True while this process tears the sandbox down: its operations then answer not_found. */
    readonly destroying: (id: string) => boolean,
  ) {}

  /** A live sandbox visible to the caller, or `not_found`. */
  async get(id: string, caller: Caller): Promise<SandboxRecord> {
    const rec = await this.deps.store.getSandbox(id);
    if (!rec || !this.visible(rec, caller) || GONE.has(rec.state) || this.pastTtl(rec)) {
      throw notFound(`sandbox ${id} not found`);
    }
    return rec;
  }

  /** Ownership (DESIGN.md §3 "Auth"): with enforcement on, an owned sandbox is private to its owner and admins. */
  visible(rec: SandboxRecord, caller: Caller): boolean {
    return this.ownerRule(rec.owner_id, caller);
  }

  pastTtl(rec: SandboxRecord): boolean {
    return Date.parse(rec.expires_at) <= this.deps.clock.now().getTime();
  }

  /** A live sandbox with a runtime on a provider this server does not run: nothing here can reach it. */
  stranded(rec: SandboxRecord): boolean {
    return !GONE.has(rec.state) && rec.runtime_id !== null && this.deps.locator.providerMissing(rec);
  }

  /** Warns once per sandbox that it is stranded (the reaper and prune leave it alone). */
  warnStranded(rec: SandboxRecord): void {
    if (this.warnedStranded.has(rec.id)) return;
    this.warnedStranded.add(rec.id);
    this.deps.warn?.(
      { sandbox_id: rec.id, provider: rec.provider },
      `sandbox left alone: provider "${rec.provider}" is not configured on this server; configure it again to reach or destroy its runtime`,
    );
  }
}

export function providerNotConfigured(rec: SandboxRecord): SbxError {
  return unavailable(`sandbox ${rec.id} runs on provider "${rec.provider}", which is not configured on this server`);
}
