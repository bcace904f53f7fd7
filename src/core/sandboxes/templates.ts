import { parseDuration } from '../duration.js';
import { badRequest, notFound, SbxError } from '../errors.js';
import { canonicalProviderName } from '../providers/registry.js';
import type { Clock, SandboxRecord, TemplateRecord, TemplateStore } from '../ports/index.js';
import { networkWithEgress } from './network-choice.js';
import { checkBindingNames } from '../secrets/rules.js';
import type { SandboxService } from './service.js';

export interface TemplateFields {
  image?: string;
  memory_mb?: number;
  vcpus?: number;
  ttl?: string;
  provider?: string;
  metadata?: Record<string, string>;
  network?: string;
  /** Egress lists of its spawns (DESIGN.md §10); given without `network`, it means `filtered`. */
  egress?: unknown;
  /** Spawns start from this snapshot (DESIGN.md §10). */
  snapshot?: string;
  volumes?: Array<{ name: string; mount_path: string }>;
  /** Runtimes of its shape kept ready (DESIGN.md §11). */
  warm?: number;
  /** Secrets its spawns bind (DESIGN.md §15), resolved in the spawner's namespace; needs network `filtered`. */
  secrets?: string[];
  /** Auto-pause and what the TTL does of its spawns (DESIGN.md §16). */
  auto_pause?: string;
  on_expire?: 'destroy' | 'pause';
}

export interface TemplateSpawnOverrides {
  ttl?: string;
  provider?: string;
  metadata?: Record<string, string>;
  owner_id?: string | null;
  network?: string;
  egress?: unknown;
  /** Environment of every command and the envd token seed (DESIGN.md §14): the spawner's, never the template's. */
  env?: Record<string, string>;
  access_token_seed?: string;
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

/** Named spawn presets (spec 4.3). */
export class TemplateService {
  constructor(
    private readonly store: TemplateStore,
    private readonly clock: Clock,
    private readonly sandboxes: SandboxService,
  ) {}

  async create(name: string, fields: TemplateFields): Promise<TemplateRecord> {
    if (!NAME.test(name))
      throw badRequest('name must start with a letter or digit and use only letters, digits, ".", "_" and "-" (at most 128)');
    const now = this.clock.now().toISOString();
    const rec: TemplateRecord = { name, ...(await this.validate(fields)), created_at: now, updated_at: now };
    await this.store.createTemplate(rec);
    return rec;
  }

  async get(name: string): Promise<TemplateRecord> {
    const rec = await this.store.getTemplate(name);
    if (!rec) throw notFound(`template ${name} not found`);
    return rec;
  }

  list(): Promise<TemplateRecord[]> {
    return this.store.listTemplates();
  }

  async update(name: string, fields: TemplateFields): Promise<TemplateRecord> {
    const rec = await this.store.updateTemplate(name, { ...(await this.validate(fields)), updated_at: this.clock.now().toISOString() });
    if (!rec) throw notFound(`template ${name} not found`);
    return rec;
  }

  async remove(name: string): Promise<void> {
    if (!(await this.store.deleteTemplate(name))) throw notFound(`template ${name} not found`);
  }

  /** Spawns from the template; overrides win over template fields, template over server defaults. */
  async spawn(name: string, overrides: TemplateSpawnOverrides, signal?: AbortSignal): Promise<SandboxRecord> {
    const t = await this.get(name);
    return this.sandboxes.spawn(
      {
        image: t.image ?? undefined,
        memory_mb: t.memory_mb ?? undefined,
        vcpus: t.vcpus ?? undefined,
        provider: overrides.provider ?? t.provider ?? undefined,
        ttl: overrides.ttl ?? t.ttl ?? undefined,
        metadata: { ...t.metadata, ...(overrides.metadata ?? {}) },
        owner_id: overrides.owner_id ?? null,
        template: t.name,
        network: overrides.network ?? t.network ?? undefined,
        // The template's lists go with the template's network; a spawn naming its own network drops them.
        ...(overrides.egress !== undefined
          ? { egress: overrides.egress }
          : overrides.network === undefined && t.egress
            ? { egress: t.egress }
            : {}),
        ...(t.snapshot ? { snapshot: t.snapshot } : {}),
        ...(t.volumes?.length ? { volumes: t.volumes } : {}),
        ...(t.secrets?.length ? { secrets: t.secrets } : {}),
        ...(t.auto_pause ? { auto_pause: t.auto_pause } : {}),
        ...(t.on_expire ? { on_expire: t.on_expire } : {}),
        ...(overrides.env ? { env: overrides.env } : {}),
        ...(overrides.access_token_seed ? { access_token_seed: overrides.access_token_seed } : {}),
      },
      signal,
    );
  }

  /**
   * A template must not promise what its spawns cannot get (DESIGN.md §10): `filtered` on a
   * provider of this node that cannot enforce egress rules at all (proot, mock, custom-http,
   * hosted) → 501. A docker provider whose conditions fail now is accepted: its spawns answer 501
   * with the reason until they hold. A provider only workers run is accepted too: a spawn goes to a
   * worker that advertises enforcement, or answers 501.
   */
  private refuseUnenforceable(provider: string | undefined): void {
    const { providers } = this.sandboxes.deps;
    const name = provider ?? providers.defaultProviderName;
    if (!providers.has(name)) return;
    if (!providers.get(name).egress)
      throw new SbxError(
        'not_implemented',
        `network "filtered" needs a provider that enforces egress rules (docker); provider ${name} cannot`,
      );
  }

  private async validate(f: TemplateFields): Promise<Omit<TemplateRecord, 'name' | 'created_at' | 'updated_at'>> {
    // Either spelling of a provider's name; the template keeps the canonical one (DESIGN §12).
    if (f.provider !== undefined) f = { ...f, provider: canonicalProviderName(f.provider) };
    if (f.ttl !== undefined && parseDuration(f.ttl, 'ttl') <= 0) throw badRequest('ttl must be positive');
    if (f.memory_mb !== undefined && (!Number.isInteger(f.memory_mb) || f.memory_mb <= 0))
      throw badRequest('memory_mb must be a positive integer');
    if (f.vcpus !== undefined && (!Number.isInteger(f.vcpus) || f.vcpus <= 0)) throw badRequest('vcpus must be a positive integer');
    if (f.provider !== undefined && !(await this.sandboxes.deps.locator.knownProvider(f.provider))) {
      throw badRequest(`unknown provider "${f.provider}"`);
    }
    const { network, egress } = networkWithEgress(f.network, f.egress);
    if (network === 'filtered') this.refuseUnenforceable(f.provider);
    const secrets = f.secrets === undefined ? [] : checkBindingNames(f.secrets);
    if (secrets.length > 0 && network !== 'filtered')
      throw badRequest(`secrets need network "filtered", not ${JSON.stringify(network ?? 'default')}`);
    if (f.auto_pause !== undefined && parseDuration(f.auto_pause, 'auto_pause') < 0) throw badRequest('auto_pause must not be negative');
    if (f.on_expire !== undefined && f.on_expire !== 'destroy' && f.on_expire !== 'pause')
      throw badRequest('on_expire must be "destroy" or "pause"');
    if (f.warm !== undefined && (!Number.isInteger(f.warm) || f.warm < 0 || f.warm > 64))
      throw badRequest('warm must be a whole number from 0 to 64');
    // A snapshot or volume the template names must exist now (404), so its spawns can start.
    let provider = f.provider;
    if (f.snapshot !== undefined) {
      if (f.image !== undefined) throw badRequest('a template with a snapshot takes its image from the snapshot: leave image out');
      provider = (await this.sandboxes.snapshots.forSpawn(f.snapshot, f.provider, null)).provider;
    }
    const volumes = f.volumes?.length
      ? await this.sandboxes.volumes.forSpawn(f.volumes, provider ?? this.sandboxes.deps.providers.defaultProviderName, null)
      : null;
    return {
      image: f.image ?? null,
      memory_mb: f.memory_mb ?? null,
      vcpus: f.vcpus ?? null,
      ttl: f.ttl ?? null,
      provider: f.provider ?? null,
      metadata: f.metadata ?? {},
      network: network ?? null,
      egress: network === 'filtered' ? (egress ?? { allow: [], deny: [] }) : null,
      snapshot: f.snapshot ?? null,
      volumes,
      warm: f.warm ? f.warm : null,
      secrets: secrets.length > 0 ? secrets : null,
      auto_pause: f.auto_pause ?? null,
      on_expire: f.on_expire ?? null,
    };
  }
}
