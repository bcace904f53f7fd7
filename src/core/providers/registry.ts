import { notFound, unavailable } from '../errors.js';
import type { Clock, Provider, ProviderHealth } from '../ports/index.js';

export interface ProviderStatus extends ProviderHealth {
  name: string;
  default: boolean;
  last_checked: string;
  capabilities: string[];
}

/**
 * A provider's canonical name (DESIGN §12): the name of its config group (`custom_http`). The other
 * spelling (`custom-http`) is accepted wherever a name comes in — spawns, templates, volumes,
 * provider routes, worker heartbeats — and answered with this one.
 */
export function canonicalProviderName(name: string): string {
  return name.replace(/-/g, '_');
}

/** The default name when no provider may be the default (`auto` found nothing that isolates). */
export const NO_PROVIDER = 'none';

/** What to do when there is no default provider: `auto` never picks mock, it must be named. */
export const NO_PROVIDER_MESSAGE =
  'no isolating provider is available on this node: start Docker (or point DOCKER_HOST or providers.docker.host at an engine), ' +
  'set providers.proot.rootfs to a root filesystem for proot, or choose the mock provider explicitly with providers.default: mock ' +
  '(mock runs commands on this host without isolation)';

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
  ) {
    this.defaultName = canonicalProviderName(defaultName);
  }

  register(provider: Provider): void {
    this.providers.set(canonicalProviderName(provider.name), provider);
  }

  /**
   * The provider a spawn without one goes to. Throws 503 `unavailable` saying how to get one when
   * there is none (`auto` found no isolating provider); `defaultName` reads without throwing.
   */
  get defaultProvider(): string {
    if (!this.providers.has(this.defaultName)) throw unavailable(this.noDefaultMessage());
    return this.defaultName;
  }

  /** The configured default's name (`none` when there is none), registered or not. */
  get defaultProviderName(): string {
    return this.defaultName;
  }

  /** Why a spawn without a provider fails when the default is not registered. */
  noDefaultMessage(): string {
    return this.defaultName === NO_PROVIDER || this.providers.size === 0
      ? NO_PROVIDER_MESSAGE
      : `the default provider "${this.defaultName}" is not available on this node`;
  }

  names(): string[] {
    return [...this.providers.keys()].sort();
  }

  has(name: string): boolean {
    return this.providers.has(canonicalProviderName(name));
  }

  /** The provider, or `not_found` naming the known ones. */
  get(name: string): Provider {
    const p = this.providers.get(canonicalProviderName(name));
    if (!p) throw notFound(`provider "${name}" is not configured (available: ${this.names().join(', ') || 'none'})`);
    return p;
  }

  all(): Provider[] {
    return this.names().map((n) => this.providers.get(n)!);
  }

  /** Health of one provider; cached for a short time unless `fresh`. Never throws. */
  async status(asked: string, fresh = false): Promise<ProviderStatus> {
    const provider = this.get(asked);
    const name = provider.name;
    const now = this.clock.now().getTime();
    const hit = this.cache.get(name);
    if (!fresh && hit && now - hit.at < this.cacheMs) return hit.status;
    let health: ProviderHealth;
    const started = performance.now();
    try {
      health = await provider.health(AbortSignal.timeout(5000));
    } catch {
      health = { healthy: false, latency_ms: performance.now() - started, error: 'health check failed' };
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
