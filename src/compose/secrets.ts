/**
 * The secrets service's key (DESIGN.md §15): `auth.secrets_key` (or `_file`); a lone SQLite node
 * without one generates one into its data dir (mode 0600); on PostgreSQL none is needed until a
 * secret exists (creates answer 503 meanwhile). A verifier in the store (an HMAC of a fixed text)
 * makes a process with another key refuse to start with a one-line error.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { SbxConfig } from '../config/index.js';
import type { Clock, LeaseStore, MetaStore, SandboxStore, SecretStore } from '../core/ports/index.js';
import { MIN_KEY_CHARS, SecretCipher } from '../core/secrets/cipher.js';
import { SecretService, type SecretServiceDeps } from '../core/secrets/service.js';
import { expandHome } from './store.js';

const VERIFIER = 'secrets_key_verifier';
export const KEY_FILE = 'secrets.key';

/** The generated key of a lone SQLite node: read when present, else made (0600, never overwritten). */
function keyFileOf(path: string): string {
  try {
    const fd = openSync(path, 'wx', 0o600);
    try {
      writeSync(fd, `${SecretCipher.generateKey()}\n`);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST')
      throw new Error(`cannot create the secrets key file ${path}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
  }
  const text = readFileSync(path, 'utf8').trim();
  if (text.length < MIN_KEY_CHARS) throw new Error(`the secrets key file ${path} is damaged: remove it only if no secret was stored`);
  return text;
}

async function keyMaterial(config: SbxConfig, store: SecretStore, home: string): Promise<string | null> {
  const configured = config.auth.secrets_key?.trim();
  if (configured) {
    if (configured.length < MIN_KEY_CHARS)
      throw new Error(`auth.secrets_key must be at least ${MIN_KEY_CHARS} characters (e.g. the output of \`openssl rand -hex 32\`)`);
    return configured;
  }
  if (config.database.driver === 'postgres') {
    if ((await store.countSecrets()) > 0)
      throw new Error(
        'secrets exist in the store but auth.secrets_key (or auth.secrets_key_file) is not set: every replica needs their key',
      );
    return null;
  }
  // A private in-memory store: its secrets live as long as it, and so does their key.
  if (config.database.path === ':memory:') return SecretCipher.generateKey();
  return keyFileOf(join(dirname(expandHome(config.database.path, home)), KEY_FILE));
}

export async function openSecrets(
  config: SbxConfig,
  store: SecretStore & MetaStore & Pick<SandboxStore, 'getSandbox'> & Pick<LeaseStore, 'getLease'>,
  home: string,
  clock: Clock,
  events?: SecretServiceDeps['events'],
): Promise<SecretService> {
  const material = await keyMaterial(config, store, home);
  const cipher = material === null ? null : new SecretCipher(material);
  if (cipher) {
    const mine = cipher.verifier();
    const stored = (await store.getMeta(VERIFIER)) || (await store.claimMeta(VERIFIER, mine));
    if (stored !== mine)
      throw new Error(
        "auth.secrets_key is not the key this installation's secrets are encrypted with " +
          "(the store's verifier differs): every replica needs the same key",
      );
  }
  return new SecretService({ store, clock, cipher, ...(events ? { events } : {}) });
}
