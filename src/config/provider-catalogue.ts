/**
 * The providers a node can run, in one table (DESIGN.md §12 "several providers side by side"):
 * which config keys turn each on, and whether `providers.default: auto` may pick it. `sbx serve`,
 * `sbx worker` (both through compose/providers.ts) and `sbx doctor` read it; nothing else lists
 * providers.
 */
import type { SbxConfig } from './types.js';

/** `required`: run it (unhealthy when unusable); `auto`: run it when usable; `off`: never. */
export type ProviderWant = 'required' | 'auto' | 'off';

export interface CatalogueEntry {
  name: 'docker' | 'proot' | 'mock';
  /** Order in which `auto` picks a default; null = never picked by `auto` (it must be named). */
  autoRank: number | null;
  /** What the config asks for this provider. */
  want(config: SbxConfig): ProviderWant;
  /** One line for doctor and errors: how to turn it on. */
  enable: string;
}

/**
 * Named as the default or `enabled: true` → required; `enabled: false` → off; otherwise detected
 * only under `providers.default: auto` (a node that names its default runs others only on request).
 */
const explicit = (c: SbxConfig, enabled: boolean | undefined, name: string): ProviderWant =>
  enabled === false ? 'off' : enabled === true || c.providers.default === name ? 'required' : c.providers.default === 'auto' ? 'auto' : 'off';

export const PROVIDER_CATALOGUE: readonly CatalogueEntry[] = [
  { name: 'docker', autoRank: 1, want: (c) => explicit(c, c.providers.docker.enabled, 'docker'), enable: 'start a Docker engine (or providers.docker.host / DOCKER_HOST)' },
  { name: 'proot', autoRank: 2, want: (c) => explicit(c, c.providers.proot.enabled, 'proot'), enable: 'set providers.proot.rootfs to a root filesystem with /bin/sh' },
  // mock runs commands on the host: only when named, never by `auto`.
  { name: 'mock', autoRank: null, want: (c) => (c.providers.mock.enabled || c.providers.default === 'mock' ? 'required' : 'off'), enable: 'providers.default: mock or providers.mock.enabled: true' },
];

/** What the config asks of each provider; throws when the default is one it turns off. */
export function wantedProviders(config: SbxConfig): Record<CatalogueEntry['name'], ProviderWant> {
  const out = Object.fromEntries(PROVIDER_CATALOGUE.map((e) => [e.name, e.want(config)])) as Record<CatalogueEntry['name'], ProviderWant>;
  const d = config.providers.default;
  if ((d === 'docker' || d === 'proot') && config.providers[d].enabled === false) {
    throw new Error(`providers.default is "${d}" but providers.${d}.enabled is false`);
  }
  return out;
}
