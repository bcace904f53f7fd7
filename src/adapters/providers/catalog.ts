/**
 * The provider catalogue (DESIGN.md §12): every provider kind a node knows, in one table — its
 * name, its config group under `providers.`, what its settings ask for, whether `providers.default:
 * auto` may pick it, and (for the kinds built from their settings alone) a factory and, through
 * `probeEntry`, a health probe. `sbx serve` and
 * `sbx worker` (through compose/providers.ts) and `sbx doctor` read it; nothing else lists
 * providers. Docker and proot are built in compose/providers.ts, which first finds their engine,
 * binary and rootfs (the host checks their health depends on).
 *
 * Adapters never import config: the settings are described here structurally, and SbxConfig's
 * `providers` group fits that shape.
 */
import type { Provider, ProviderHealth } from '../../core/ports/index.js';
import { canonicalProviderName as canonical } from '../../core/providers/registry.js';

/** `required`: run it (unhealthy when unusable); `auto`: run it when usable; `off`: never. */
export type ProviderWant = 'required' | 'auto' | 'off';

/** The part of `providers.*` the catalogue reads. */
export interface CatalogueSettings {
  default: string;
  docker: { enabled?: boolean };
  proot: { enabled?: boolean };
  mock: { enabled: boolean; root_dir: string };
  custom_http: { enabled?: boolean; base_url?: string; api_key?: string; timeout: string };
  hosted: { enabled?: boolean; base_url?: string; api_key?: string; template?: string };
  firecracker: { enabled?: boolean; binary: string; kernel_path: string; rootfs_path: string; data_dir: string };
}

/** What a factory may use besides the provider's own settings. */
export interface FactoryContext {
  installationId: string;
  /** Parses a Go-style duration (`30s`) to milliseconds; the config layer validated it already. */
  durationMs(text: string): number;
  /** A per-installation scratch directory for providers that keep files on this host. */
  scratchDir(name: string): string;
}

/** A provider's name is its config group's (DESIGN §12). */
export type ProviderName = 'docker' | 'proot' | 'mock' | 'custom_http' | 'hosted' | 'firecracker';
export type ConfigGroup = Exclude<keyof CatalogueSettings, 'default'>;

export interface CatalogueEntry {
  name: ProviderName;
  /** The key under `providers.` that holds its settings. */
  group: ConfigGroup;
  /** Order in which `auto` picks a default; null = never picked by `auto` (it must be named). */
  autoRank: number | null;
  /** False: a kind this build cannot run yet; enabling it or naming it the default is a start error. */
  available: boolean;
  /** What the settings ask for this provider. */
  want(settings: CatalogueSettings): ProviderWant;
  /** One line for doctor and errors: how to turn it on. */
  enable: string;
  /** A warning logged when it runs (what an operator must know about it). */
  notice?: string;
  /**
   * Builds it from its settings alone. Absent for docker and proot (compose/providers.ts finds their
   * engine or binary first). Loads its adapter lazily, so reading the catalogue stays cheap.
   */
  create?(settings: CatalogueSettings, ctx: FactoryContext): Promise<Provider>;
}

/**
 * Named as the default or `enabled: true` → required; `enabled: false` → off; otherwise detected
 * only under `providers.default: auto` (a node that names its default runs others only on request).
 */
const detected = (s: CatalogueSettings, enabled: boolean | undefined, name: string): ProviderWant =>
  enabled === false ? 'off' : enabled === true || canonical(s.default) === name ? 'required' : s.default === 'auto' ? 'auto' : 'off';

/** Never detected: runs only when named or `enabled: true`. */
const onRequest = (s: CatalogueSettings, enabled: boolean | undefined, name: string): ProviderWant =>
  enabled === false ? 'off' : enabled === true || canonical(s.default) === name ? 'required' : 'off';

function notAvailable(name: string): never {
  throw new Error(
    `provider "${name}" is not available in this build of sbx yet; remove providers.${name}.enabled (or pick another providers.default)`,
  );
}

export const PROVIDER_CATALOGUE: readonly CatalogueEntry[] = [
  {
    name: 'docker',
    group: 'docker',
    autoRank: 1,
    available: true,
    want: (s) => detected(s, s.docker.enabled, 'docker'),
    enable: 'start a Docker engine (or providers.docker.host / DOCKER_HOST)',
  },
  {
    name: 'proot',
    group: 'proot',
    autoRank: 2,
    available: true,
    want: (s) => detected(s, s.proot.enabled, 'proot'),
    enable: 'set providers.proot.rootfs to a root filesystem with /bin/sh',
  },
  // mock runs commands on the host: only when named, never by `auto`.
  {
    name: 'mock',
    group: 'mock',
    autoRank: null,
    available: true,
    want: (s) => (s.mock.enabled || s.default === 'mock' ? 'required' : 'off'),
    enable: 'providers.default: mock or providers.mock.enabled: true',
    notice: 'commands run directly on this host, without isolation',
    async create(s, ctx) {
      const { createMockProvider } = await import('./mock/index.js');
      // Per installation by default, so two servers on one host never count each other's sandboxes.
      return createMockProvider({ rootDir: s.mock.root_dir || ctx.scratchDir('sbx-mock'), installationId: ctx.installationId });
    },
  },
  {
    name: 'custom_http',
    group: 'custom_http',
    autoRank: null,
    available: true,
    want: (s) => onRequest(s, s.custom_http.enabled, 'custom_http'),
    enable: 'providers.custom_http.enabled: true with providers.custom_http.base_url (and api_key_file)',
    async create(s, ctx) {
      const c = s.custom_http;
      if (!c.base_url) throw new Error('providers.custom_http.base_url is not set: name the backend of the custom HTTP contract');
      const { createCustomHttpProvider } = await import('./custom-http/index.js');
      return createCustomHttpProvider({ baseUrl: c.base_url, apiKey: c.api_key, timeoutMs: ctx.durationMs(c.timeout) });
    },
  },
  {
    name: 'hosted',
    group: 'hosted',
    autoRank: null,
    available: true,
    want: (s) => onRequest(s, s.hosted.enabled, 'hosted'),
    enable: 'providers.hosted.enabled: true with providers.hosted.api_key_file (an E2B-compatible service; base_url and template optional)',
    async create(s, ctx) {
      const h = s.hosted;
      if (!h.api_key) throw new Error("providers.hosted.api_key is not set: give the hosted service's key (api_key_file)");
      const { createHostedProvider } = await import('./hosted/index.js');
      return createHostedProvider({
        apiKey: h.api_key,
        installationId: ctx.installationId,
        ...(h.base_url ? { baseUrl: h.base_url } : {}),
        ...(h.template ? { template: h.template } : {}),
      });
    },
  },
  {
    name: 'firecracker',
    group: 'firecracker',
    autoRank: null,
    available: true,
    want: (s) => onRequest(s, s.firecracker.enabled, 'firecracker'),
    enable:
      'providers.firecracker.enabled: true with kernel_path and rootfs_path (a rootfs holding the guest agent; ' +
      'docs/providers/firecracker.md)',
    async create(s, ctx) {
      const f = s.firecracker;
      const { createFirecrackerProvider } = await import('./firecracker/index.js');
      // Health names what is missing (binary, kernel, rootfs, /dev/kvm): the provider is built regardless.
      return createFirecrackerProvider({
        binary: f.binary,
        kernelPath: f.kernel_path,
        rootfsPath: f.rootfs_path,
        dataDir: f.data_dir || ctx.scratchDir('sbx-fc'),
        installationId: ctx.installationId,
      });
    },
  },
];

/**
 * The health probe of a kind the catalogue builds (what `sbx doctor` runs): built from the
 * settings, asked for its health within `signal`, closed. A factory that refuses is unhealthy
 * with its reason.
 */
export async function probeEntry(
  entry: CatalogueEntry,
  settings: CatalogueSettings,
  ctx: FactoryContext,
  signal: AbortSignal,
): Promise<ProviderHealth> {
  if (!entry.create) throw new Error(`provider "${entry.name}" is probed where it is built (compose/providers.ts)`);
  const started = performance.now();
  let provider: Provider;
  try {
    provider = await entry.create(settings, ctx);
  } catch (err) {
    return { healthy: false, latency_ms: Math.round(performance.now() - started), error: (err as Error).message };
  }
  try {
    return await provider.health(signal);
  } finally {
    await provider.close?.();
  }
}

/** The catalogue entry of a provider name, if any. */
export function catalogueEntry(name: string): CatalogueEntry | undefined {
  return PROVIDER_CATALOGUE.find((e) => e.name === name);
}

/** What the settings ask of each provider; throws when the default is one they turn off or one this build cannot run. */
export function wantedProviders(settings: CatalogueSettings): Record<ProviderName, ProviderWant> {
  const out = Object.fromEntries(PROVIDER_CATALOGUE.map((e) => [e.name, e.want(settings)])) as Record<ProviderName, ProviderWant>;
  const d = settings.default;
  const entry = catalogueEntry(d);
  if (entry && out[entry.name] === 'off') {
    throw new Error(`providers.default is "${d}" but providers.${entry.group}.enabled is false`);
  }
  for (const e of PROVIDER_CATALOGUE) if (!e.available && out[e.name] === 'required') notAvailable(e.group);
  return out;
}
