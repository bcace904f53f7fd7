/**
 * Secrets the sandbox never sees (DESIGN.md §15): owner-scoped CRUD over encrypted values, the
 * bindings a spawn makes (a placeholder per binding, put into the sandbox's environment), and the
 * control plane's `SecretSource` for the egress gateway. A value is never answered, logged or put
 * into an error; it is decrypted only for `forSandbox`.
 */
import { randomBytes } from 'node:crypto';
import { validateOwnerId } from '../admission/owner.js';
import { badRequest, notFound, SbxError, unavailable } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { parseRule } from '../network/rules.js';
import type { Clock, LeaseStore, SandboxStore } from '../ports/index.js';
import type { Caller } from '../sandboxes/caller.js';
import type { SecretCipher } from './cipher.js';
import { PLACEHOLDER_PREFIX, type BoundSecret, type SecretSource } from './port.js';
import { checkBindingNames, checkSecretHosts, checkSecretName, checkSecretValue } from './rules.js';
import type { SecretRecord, SecretStore } from './store-port.js';

/** A secret as answered: never its value. `owner_id` null: the secret of no owner. */
export interface SecretView {
  owner_id: string | null;
  name: string;
  hosts: string[];
  allow_plain_http: boolean;
  created_at: string;
  updated_at: string;
  fingerprint: string;
}

export interface SecretServiceDeps {
  store: SecretStore & Pick<SandboxStore, 'getSandbox'> & Pick<LeaseStore, 'getLease'>;
  clock: Clock;
  /** Null: no key here (PostgreSQL without `auth.secrets_key`): creates and new values answer 503, nothing decrypts. */
  cipher: SecretCipher | null;
  /** `secret.created|updated|deleted` go here: name, owner and fingerprint, never the value. */
  events?: Pick<EventBus, 'publish'>;
}

/** A binding a spawn makes: the variable `name` holds `placeholder` inside the sandbox. */
export interface PlannedBinding {
  name: string;
  placeholder: string;
}

const CACHE_MS = 1_000;
const LIVE = new Set(['running', 'unhealthy', 'error']);
export const MISSING_KEY =
  'secrets need an encryption key shared by every replica: set auth.secrets_key (or auth.secrets_key_file) and restart';

function view(rec: SecretRecord): SecretView {
  return {
    owner_id: rec.owner_key === '' ? null : rec.owner_key,
    name: rec.name,
    hosts: rec.hosts,
    allow_plain_http: rec.allow_plain_http,
    created_at: rec.created_at,
    updated_at: rec.updated_at,
    fingerprint: rec.fingerprint,
  };
}

function checkFlag(raw: unknown): boolean {
  if (typeof raw !== 'boolean') throw badRequest('allow_plain_http must be true or false');
  return raw;
}

/**
 * A spawn's secret bindings (DESIGN.md §15): only on network `filtered` (else 400 naming it), names
 * resolved in the spawn owner's namespace; none when `names` is absent or empty.
 */
export async function planSpawnSecrets(
  binder: Pick<SecretService, 'plan'> | undefined,
  names: unknown,
  network: string | null,
  owner: string | null,
): Promise<PlannedBinding[]> {
  if (names === undefined || names === null || (Array.isArray(names) && names.length === 0)) return [];
  if (network !== 'filtered')
    throw badRequest(
      `secrets need network "filtered" (the egress gateway puts their values into requests), not ${JSON.stringify(network ?? 'default')}`,
    );
  if (!binder) throw new SbxError('not_implemented', 'secrets are not available on this server');
  return binder.plan(owner, names);
}

export class SecretService implements SecretSource {
  private readonly cache = new Map<string, { at: number; bound: Promise<readonly BoundSecret[]> }>();

  constructor(private readonly deps: SecretServiceDeps) {}

  /** The namespace a request addresses: the caller's own, or with `?owner_id=` (admins only) another owner's. */
  ownerOf(caller: Caller, ownerQuery?: string): string {
    if (ownerQuery === undefined) return caller.owner_id ?? '';
    if (!caller.admin) throw new SbxError('forbidden', "owner_id addresses another owner's secrets: it needs an admin credential");
    return validateOwnerId(ownerQuery, 'owner_id') ?? '';
  }

  async create(caller: Caller, body: Record<string, unknown>, ownerQuery?: string): Promise<SecretView> {
    const owner = this.ownerOf(caller, ownerQuery);
    const name = checkSecretName(body.name);
    const value = checkSecretValue(body.value);
    const hosts = checkSecretHosts(body.hosts);
    const allow_plain_http = body.allow_plain_http === undefined ? false : checkFlag(body.allow_plain_http);
    const cipher = this.requireCipher();
    const now = this.deps.clock.now().toISOString();
    const rec: SecretRecord = {
      owner_key: owner,
      name,
      ciphertext: cipher.encrypt(value, owner, name),
      hosts,
      allow_plain_http,
      fingerprint: cipher.fingerprint(value),
      created_at: now,
      updated_at: now,
    };
    await this.deps.store.insertSecret(rec);
    this.publish('secret.created', rec);
    return view(rec);
  }

  /** Sorted by name (admins without `?owner_id=`: every owner's, by owner then name). */
  async list(caller: Caller, ownerQuery?: string): Promise<SecretView[]> {
    const owner = caller.admin && ownerQuery === undefined ? null : this.ownerOf(caller, ownerQuery);
    return (await this.deps.store.listSecrets(owner)).map(view);
  }

  async get(caller: Caller, rawName: string, ownerQuery?: string): Promise<SecretView> {
    const owner = this.ownerOf(caller, ownerQuery);
    const name = checkSecretName(rawName);
    const rec = await this.deps.store.getSecret(owner, name);
    if (!rec) throw notFound(`secret ${name} not found`);
    return view(rec);
  }

  /** A new value, hosts and/or allow_plain_http; applies to the gateway's next request (its cache is ≤ 1 s). */
  async update(caller: Caller, rawName: string, body: Record<string, unknown>, ownerQuery?: string): Promise<SecretView> {
    const owner = this.ownerOf(caller, ownerQuery);
    const name = checkSecretName(rawName);
    const patch: Parameters<SecretStore['updateSecret']>[2] = { updated_at: this.deps.clock.now().toISOString() };
    if (body.value === undefined && body.hosts === undefined && body.allow_plain_http === undefined)
      throw badRequest('nothing to change: give value, hosts and/or allow_plain_http');
    if (body.hosts !== undefined) patch.hosts = checkSecretHosts(body.hosts);
    if (body.allow_plain_http !== undefined) patch.allow_plain_http = checkFlag(body.allow_plain_http);
    if (body.value !== undefined) {
      const value = checkSecretValue(body.value);
      const cipher = this.requireCipher();
      patch.ciphertext = cipher.encrypt(value, owner, name);
      patch.fingerprint = cipher.fingerprint(value);
    }
    const rec = await this.deps.store.updateSecret(owner, name, patch);
    if (!rec) throw notFound(`secret ${name} not found`);
    this.cache.clear();
    this.publish('secret.updated', rec);
    return view(rec);
  }

  async remove(caller: Caller, rawName: string, ownerQuery?: string): Promise<void> {
    const owner = this.ownerOf(caller, ownerQuery);
    const name = checkSecretName(rawName);
    const rec = await this.deps.store.getSecret(owner, name);
    if (!rec || !(await this.deps.store.deleteSecret(owner, name))) throw notFound(`secret ${name} not found`);
    this.cache.clear();
    this.publish('secret.deleted', rec);
  }

  /** An event of a secret's change: its name, owner and fingerprint (a keyed hash) — never the value or its ciphertext. */
  private publish(type: 'secret.created' | 'secret.updated' | 'secret.deleted', rec: SecretRecord): void {
    const owner = rec.owner_key === '' ? null : rec.owner_key;
    this.deps.events?.publish({
      type,
      ...(owner ? { owner_id: owner } : {}),
      data: { name: rec.name, owner, fingerprint: rec.fingerprint },
    });
  }

  /**
   * The bindings of a spawn of `owner` (DESIGN.md §15): every name must be a secret of that owner
   * (another owner's is as unknown as a missing one: 400 naming it); each gets a fresh placeholder.
   */
  async plan(owner: string | null, rawNames: unknown): Promise<PlannedBinding[]> {
    const names = checkBindingNames(rawNames);
    const out: PlannedBinding[] = [];
    for (const name of names) {
      if (!(await this.deps.store.getSecret(owner ?? '', name)))
        throw badRequest(`unknown secret ${name}: create it first (sbx secrets set)`);
      out.push({ name, placeholder: PLACEHOLDER_PREFIX + randomBytes(16).toString('hex') });
    }
    return out;
  }

  /** Stores a new sandbox's bindings (before its row: the gateway never sees the sandbox without them). */
  async record(sandboxId: string, owner: string | null, bindings: readonly PlannedBinding[]): Promise<void> {
    if (bindings.length === 0) return;
    await this.deps.store.insertSecretBindings(
      bindings.map((b) => ({ sandbox_id: sandboxId, owner_key: owner ?? '', name: b.name, placeholder: b.placeholder })),
    );
  }

  /**
   * A fork's bindings (DESIGN.md §15 "Forks get their own placeholders"): the parent's secrets bound
   * to the child with fresh placeholders, before the child starts. The shape of fork's hook.
   */
  async copyBindings(parentId: string, childId: string): Promise<void> {
    const rows = await this.deps.store.secretBindings(parentId);
    await this.deps.store.insertSecretBindings(
      rows.map(({ binding }) => ({
        sandbox_id: childId,
        owner_key: binding.owner_key,
        name: binding.name,
        placeholder: PLACEHOLDER_PREFIX + randomBytes(16).toString('hex'),
      })),
    );
  }

  async dropBindings(childId: string): Promise<void> {
    await this.deps.store.deleteSecretBindings(childId);
  }

  /**
   * The variables a sandbox's commands get for its bindings (name → its own placeholder), read from
   * the bindings, so a copy of another sandbox's environment (a fork) never carries that sandbox's
   * placeholders. Empty, without a store read, when `env` holds no placeholder.
   */
  async placeholderEnv(sandboxId: string, env: Readonly<Record<string, string>> | null | undefined): Promise<Record<string, string>> {
    if (!env || !Object.values(env).some((v) => v.startsWith(PLACEHOLDER_PREFIX))) return {};
    const out: Record<string, string> = {};
    for (const [k, v] of Object.entries(env)) if (v.startsWith(PLACEHOLDER_PREFIX)) out[k] = '';
    for (const { binding } of await this.deps.store.secretBindings(sandboxId)) out[binding.name] = binding.placeholder;
    // A placeholder variable with no binding of this sandbox stays empty rather than another's.
    return out;
  }

  /**
   * SecretSource for this node's gateway and the workers' fetch: a live sandbox's bindings with the
   * current values, cached ≤ 1 s. Fails closed: a value that does not decrypt (or no key) throws.
   * A deleted secret is no longer bound; a sandbox that is not live has none.
   */
  forSandbox(sandboxId: string): Promise<readonly BoundSecret[]> {
    const now = performance.now();
    const hit = this.cache.get(sandboxId);
    if (hit && now - hit.at < CACHE_MS) return hit.bound;
    if (this.cache.size > 4096) for (const [k, v] of this.cache) if (now - v.at >= CACHE_MS) this.cache.delete(k);
    const bound = this.load(sandboxId);
    this.cache.set(sandboxId, { at: now, bound });
    bound.catch(() => this.cache.delete(sandboxId));
    return bound;
  }

  /**
   * A worker's fetch (DESIGN.md §15): the bound secrets of a live sandbox placed on `workerId` whose
   * lease that worker holds now; any other sandbox → 403 (unknown ones too, so ids cannot be probed).
   */
  async forWorker(sandboxId: string, workerId: string): Promise<readonly BoundSecret[]> {
    const refuse = () => new SbxError('forbidden', `sandbox ${sandboxId} is not placed on worker ${workerId}`);
    const rec = await this.deps.store.getSandbox(sandboxId);
    if (!rec || rec.worker_id !== workerId || !LIVE.has(rec.state)) throw refuse();
    const lease = await this.deps.store.getLease(sandboxId);
    if (!lease || lease.holder_id !== workerId || Date.parse(lease.expires_at) <= this.deps.clock.now().getTime()) throw refuse();
    return this.forSandbox(sandboxId);
  }

  private async load(sandboxId: string): Promise<readonly BoundSecret[]> {
    const rec = await this.deps.store.getSandbox(sandboxId);
    if (!rec || !LIVE.has(rec.state)) return [];
    const rows = await this.deps.store.secretBindings(sandboxId);
    const out: BoundSecret[] = [];
    for (const { binding, secret } of rows) {
      if (!secret) continue;
      const cipher = this.deps.cipher;
      if (!cipher) throw unavailable(MISSING_KEY);
      out.push({
        name: binding.name,
        placeholder: binding.placeholder,
        value: cipher.decrypt(secret.ciphertext, secret.owner_key, secret.name),
        hosts: secret.hosts.map((h) => parseRule(h)),
        allowPlainHttp: secret.allow_plain_http,
      });
    }
    return out;
  }

  private requireCipher(): SecretCipher {
    if (!this.deps.cipher) throw unavailable(MISSING_KEY);
    return this.deps.cipher;
  }
}
