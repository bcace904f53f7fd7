import type { SandboxTally, Store } from '../ports/index.js';

/** The store's health as readers report it; latency is in milliseconds, unrounded. */
export interface StoreHealth {
  healthy: boolean;
  latency_ms: number;
}

/** Read-only view of the store for health, metrics and diagnostics. */
export class StoreProbe {
  constructor(private readonly store: Pick<Store, 'driver' | 'ping' | 'tallySandboxes'>) {}

  /** `sqlite` or `postgres`. */
  get driver(): string {
    return this.store.driver;
  }

  /** Pings the store; a failure is reported as unhealthy, never thrown. */
  async check(): Promise<StoreHealth> {
    try {
      return { healthy: true, latency_ms: await this.store.ping() };
    } catch {
      return { healthy: false, latency_ms: 0 };
    }
  }

  /** Every sandbox row counted by state, provider, worker and TTL side (metrics and diagnostics). */
  tally(now: Date): Promise<SandboxTally[]> {
    return this.store.tallySandboxes(now.toISOString());
  }
}
