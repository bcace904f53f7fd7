/**
 * The reaper's pass (spec 3.1; DESIGN.md §3 "Expiry", §13): sandboxes past their TTL, and runtimes
 * a provider reports stopped or missing, are torn down; remote sandboxes past their TTL go to their
 * workers. Rows are read in keyset pages, past-TTL ones by the expires_at index.
 */
import type { RuntimeStatus, SandboxRecord } from '../ports/index.js';
import type { SandboxDeps } from './deps.js';
import type { SandboxLookup } from './lookup.js';
import { sandboxPages } from './pages.js';
import type { Teardown } from './pause.js';

/** Bound on the reaper's runtime status probe, so one wedged backend cannot stall a pass. */
const STATUS_TIMEOUT_MS = 10_000;

export interface ReapOptions {
  local?: boolean;
  remote?: boolean;
  signal?: AbortSignal;
}

/** What the reaper reads and writes: records, this node's providers, the locator, events, the clock. */
export type ReaperDeps = Pick<SandboxDeps, 'store' | 'clock' | 'settings' | 'locator' | 'providers' | 'bus'>;

export class Reaper {
  constructor(
    private readonly deps: ReaperDeps,
    private readonly lookup: SandboxLookup,
    private readonly teardown: Teardown,
    /** `on_expire: pause` at the TTL (PauseService.pauseAtExpiry). */
    private readonly pauseAtExpiry: (rec: SandboxRecord) => Promise<void>,
  ) {}

  /**
   * `local`: this node's own sandboxes (where its local worker runs); `remote`: past-TTL sandboxes
   * of workers (one leader replica's job). The signal stops the pass between sandboxes.
   */
  async reap(opts: ReapOptions = {}): Promise<number> {
    const { local = true, remote = true, signal } = opts;
    const now = this.deps.clock.now().getTime();
    await this.pauseDue(now, local, remote, signal);
    let n = local ? await this.reapLocal(now, signal) : 0;
    if (remote && !signal?.aborted) n += await this.reapRemote(now, signal);
    return n;
  }

  private async reapLocal(now: number, signal?: AbortSignal): Promise<number> {
    // Page by page: a pass holds at most one page of records however many sandboxes live.
    const rows = sandboxPages(this.deps.store, {
      states: ['running', 'paused', 'unhealthy', 'error', 'expired'],
      worker_id: this.deps.settings.worker_id,
    });
    let n = 0;
    // A provider that did not answer once is not asked again this pass: each try may take the full timeout.
    const silent = new Set<string>();
    // Listed after the records were read, so a sandbox that started meanwhile is in the listing.
    const listings = new Map<string, Promise<Map<string, RuntimeStatus> | null>>();
    for await (const rec of rows) {
      if (signal?.aborted) break;
      if (this.lookup.stranded(rec)) {
        this.lookup.warnStranded(rec);
        continue;
      }
      let reason: string;
      if (rec.state === 'expired' || Date.parse(rec.expires_at) <= now) reason = 'expired';
      else if (rec.state === 'error' && (await this.runtimeLost(rec, silent))) reason = 'runtime_lost';
      else if (rec.state === 'running' && (await this.listedGone(rec, listings)) && (await this.markLost(rec, silent)))
        reason = 'runtime_lost';
      else continue;
      try {
        await this.teardown(rec, reason, false);
        n++;
      } catch {
        // provider down: the record stays and the next pass tries again
      }
    }
    return n;
  }

  /**
   * Remote sandboxes past their TTL: their workers tear them down (the lease is released). A
   * worker that does not answer leaves the record for the next pass.
   */
  private async reapRemote(now: number, signal?: AbortSignal): Promise<number> {
    let n = 0;
    // Past their TTL only, by the expires_at index.
    for await (const rec of sandboxPages(this.deps.store, {
      states: ['running', 'paused', 'unhealthy', 'error', 'expired'],
      expires_by: new Date(now).toISOString(),
    })) {
      if (signal?.aborted) break;
      if (this.deps.locator.isLocal(rec)) continue;
      if (rec.state !== 'expired' && Date.parse(rec.expires_at) > now) continue;
      try {
        await this.teardown(rec, 'expired', false);
        n++;
      } catch {
        // worker unreachable: tried again next pass
      }
    }
    return n;
  }

  /**
   * `on_expire: pause` (DESIGN.md §16): running sandboxes whose TTL ended are paused (by the
   * `pause_at` index), this node's in the local pass and workers' in the remote one. A failure is
   * tried again next pass.
   */
  private async pauseDue(now: number, local: boolean, remote: boolean, signal?: AbortSignal): Promise<void> {
    if (!local && !remote) return;
    for await (const rec of sandboxPages(this.deps.store, { states: ['running'], pause_due_by: new Date(now).toISOString() })) {
      if (signal?.aborted) break;
      const mine = this.deps.locator.isLocal(rec) ? local : remote;
      if (!mine || Date.parse(rec.expires_at) <= now || this.lookup.stranded(rec)) continue;
      await this.pauseAtExpiry(rec).catch(() => undefined);
    }
  }

  /** True when the provider's runtime listing shows this sandbox's runtime stopped or absent. */
  private async listedGone(rec: SandboxRecord, listings: Map<string, Promise<Map<string, RuntimeStatus> | null>>): Promise<boolean> {
    if (!rec.runtime_id) return false;
    const provider = this.deps.providers.get(rec.provider);
    if (!provider.listRuntimes) return false;
    let listing = listings.get(rec.provider);
    if (!listing) {
      listing = provider
        .listRuntimes(AbortSignal.timeout(STATUS_TIMEOUT_MS))
        .then((list) => new Map(list.map((r) => [r.runtime_id, r.status])))
        .catch(() => null); // backend down: nothing is judged this pass
      listings.set(rec.provider, listing);
    }
    const statuses = await listing;
    const status = statuses?.get(rec.runtime_id);
    return statuses !== null && status !== 'running' && status !== 'paused';
  }

  /**
   * Confirms with the runtime's own status that it is gone, then moves the running sandbox to
   * `error`; false when the runtime runs after all or something else moved the sandbox first.
   */
  private async markLost(rec: SandboxRecord, silent: Set<string>): Promise<boolean> {
    const status = await this.runtimeStatus(rec, silent);
    if (status === null || status === 'running' || status === 'paused') return false;
    const current = await this.deps.store.getSandbox(rec.id);
    if (!current || current.state !== 'running') return false;
    await this.deps.store.updateSandbox(rec.id, { state: 'error', updated_at: this.deps.clock.now().toISOString() });
    this.deps.bus.publish({
      type: 'sandbox.error',
      sandbox_id: rec.id,
      owner_id: rec.owner_id ?? undefined,
      worker_id: rec.worker_id,
      data: { provider: rec.provider, operation: 'reap', reason: `runtime ${status}` },
    });
    return true;
  }

  /** True only when the provider positively reports the runtime stopped or missing. */
  private async runtimeLost(rec: SandboxRecord, silent: Set<string>): Promise<boolean> {
    const status = await this.runtimeStatus(rec, silent);
    return status !== null && status !== 'running' && status !== 'paused';
  }

  /** The runtime's status from its provider, or null when the provider cannot answer. */
  private async runtimeStatus(rec: SandboxRecord, silent: Set<string>): Promise<RuntimeStatus | null> {
    if (!rec.runtime_id) return 'missing';
    if (silent.has(rec.provider)) return null;
    try {
      return await this.deps.providers.get(rec.provider).status(rec.runtime_id, AbortSignal.timeout(STATUS_TIMEOUT_MS));
    } catch {
      silent.add(rec.provider); // the backend is down, not the sandbox
      return null;
    }
  }
}
