import { notFound } from '../errors.js';
import type { Clock, Provider, ProviderHealth } from '../ports.js';

export interface ProviderStatus extends ProviderHealth {
  name: string;
  default: boolean;
  last_checked: string;
  capabilities: string[];
}

/**
 * The providers this node runs, the default one, and a short-lived health cache so that
 * readiness probes and lists do not hammer a backend.
 */
export class ProviderRegistry {
  private readonly providers = new Map<string, Provider>();
  private readonly cache = new Map<string, { at: number; status: ProviderStatus }>();

  constructor(
    private readonly clock: Clock,
    private defaultName: string,
    private readonly cacheMs = 2000,
  ) {}

  register(provider: Provider): void {
    this.providers.set(provider.name, provider);
  }

  get defaultProvider(): string {
    return this.defaultName;
  }

  names(): string[] {
    return [...this.providers.keys()].sort();
  }

  has(name: string): boolean {
    return this.providers.has(name);
  }

  /** The provider, or `not_found` naming the known ones. */
  get(name: string): Provider {
    const p = this.providers.get(name);
    if (!p) throw notFound(`provider "${name}" is not configured (available: ${this.names().join(', ') || 'none'})`);
    return p;
  }

  all(): Provider[] {
    return this.names().map((n) => this.providers.get(n)!);
  }

  /** Health of one provider; cached for a short time unless `fresh`. Never throws. */
  async status(name: string, fresh = false): Promise<ProviderStatus> {
    const provider = this.get(name);
    const now = this.clock.now().getTime();
    const hit = this.cache.get(name);
    if (!fresh && hit && now - hit.at < this.cacheMs) return hit.status;
    let health: ProviderHealth;
    const started = Date.now();
    try {
      health = await provider.health(AbortSignal.timeout(5000));
    } catch {
      health = { healthy: false, latency_ms: Date.now() - started, error: 'health check failed' };
    }
    const status: ProviderStatus = {
      name,
      default: name === this.defaultName,
      last_checked: this.clock.now().toISOString(),
      capabilities: [...provider.capabilities],
      ...health,
      latency_ms: Math.max(0, Math.round(health.latency_ms)),
    };
    this.cache.set(name, { at: now, status });
    return status;
  }

  async statuses(fresh = false): Promise<ProviderStatus[]> {
    return Promise.all(this.names().map((n) => this.status(n, fresh)));
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.all().map((p) => p.close?.()));
  }
}
