/**
 * Which providers a spawn can name (DESIGN.md §7, §12): this node's own and those registered
 * workers advertise — the default a spawn gets, whether a name is known, and the provider list's
 * items. The locator's part; it reads the workers through the locator's cached registry read.
 */
import { badRequest, unavailable } from '../errors.js';
import type { Clock, WorkerRecord } from '../ports/index.js';
import type { ProviderRegistry, ProviderStatus } from '../providers/registry.js';
import { providerCapabilities, remoteDefaultProvider } from './placement.js';

export interface OfferDeps {
  providers: ProviderRegistry;
  clock: Clock;
  /** This node's worker id (`local`). */
  workerId: string;
  /** `server.local_worker`. */
  localWorker: boolean;
}

export class ProviderOffers {
  constructor(
    private readonly deps: OfferDeps,
    /** The registered workers (the locator's cached read). */
    private readonly workers: () => Promise<WorkerRecord[]>,
    /** True when the worker heartbeats, is fresh and not offline. */
    private readonly fresh: (w: WorkerRecord) => boolean,
  ) {}

  /** The provider a spawn uses: the one named, else the default (here, or what workers offer). */
  async spawnProvider(named: string | undefined): Promise<string> {
    const { providers } = this.deps;
    if (named !== undefined) {
      if (!(await this.knownProvider(named))) {
        const offered = await this.offeredProviders();
        throw badRequest(`unknown provider "${named}" (available: ${offered.join(', ') || 'none'})`);
      }
      return named;
    }
    if (this.deps.localWorker && providers.has(providers.defaultProviderName)) return providers.defaultProviderName;
    const workers = await this.workers();
    const remote = remoteDefaultProvider(providers.defaultProviderName, workers, this.deps.clock.now(), this.deps.workerId);
    if (remote !== null && (await this.knownProvider(remote))) return remote;
    if (!this.deps.localWorker)
      throw unavailable('no online worker offers a provider: start one with `sbx worker --control-plane URL --listen ADDR`');
    // Nothing anywhere: the registry says why and how to get one (503).
    return providers.defaultProvider;
  }

  /** True when this node or a registered worker runs the provider. */
  async knownProvider(name: string): Promise<boolean> {
    if (this.deps.localWorker && this.deps.providers.has(name)) return true;
    return (await this.workers()).some((w) => w.id !== this.deps.workerId && w.providers.includes(name));
  }

  /** Provider names this node or any registered worker runs, sorted. */
  async offeredProviders(): Promise<string[]> {
    const names = new Set(this.deps.localWorker ? this.deps.providers.names() : []);
    for (const w of await this.workers()) if (w.id !== this.deps.workerId) for (const p of w.providers) names.add(p);
    return [...names].sort();
  }

  /**
   * Provider list items for this node's providers and, beside them, for every provider that an
   * online, fresh remote worker advertises (DESIGN.md §7: healthy when one healthy worker has it —
   * workers advertise only their healthy providers). A remote item's `last_checked` is the newest
   * heartbeat that advertised it; its latency is not measured from here (0).
   */
  async providerStatuses(fresh = false): Promise<ProviderStatus[]> {
    const local = this.deps.localWorker ? await this.deps.providers.statuses(fresh) : [];
    const seen = new Set(local.map((p) => p.name));
    const remote = new Map<string, { at: string; capabilities: Set<string> }>();
    for (const w of await this.workers()) {
      if (w.id === this.deps.workerId || w.status !== 'online' || !this.fresh(w)) continue;
      for (const name of w.providers) {
        if (seen.has(name)) continue;
        const cur = remote.get(name) ?? { at: w.last_heartbeat, capabilities: new Set<string>() };
        if (w.last_heartbeat > cur.at) cur.at = w.last_heartbeat;
        for (const c of w.capabilities) cur.capabilities.add(c);
        // Per provider (`tty:docker`): what this provider really has on that worker.
        for (const c of providerCapabilities(w, name)) cur.capabilities.add(c);
        remote.set(name, cur);
      }
    }
    const items: ProviderStatus[] = [...remote].map(([name, r]) => ({
      name,
      healthy: true,
      default: name === this.deps.providers.defaultProviderName,
      latency_ms: 0,
      last_checked: r.at,
      capabilities: [...r.capabilities].sort(),
    }));
    return [...local, ...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}
