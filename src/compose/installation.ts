/**
 * The installation's own values, claimed once in the store (DESIGN.md §3, §9, §13): its id and the
 * secrets every replica and restart must agree on. Claimed, not read-then-written, so replicas
 * starting at once on a fresh store agree on one value. Never shown.
 */
import { randomBytes } from 'node:crypto';
import type { IdSource, Store } from '../core/ports/index.js';

export interface InstallationSecrets {
  installationId: string;
  /** Keys the derived owners (`key/…`, `ip/…`) so they cannot be reversed by guessing. */
  ownerKey: string;
  /** Signs list cursors (DESIGN §13): every replica accepts every other's. */
  cursorSecret: string;
  /** Preview tokens derive from it (DESIGN §9): none is stored per sandbox. */
  previewSecret: string;
}

export async function installationSecrets(store: Store, ids: IdSource): Promise<InstallationSecrets> {
  const claim = async (key: string, make: () => string) => (await store.getMeta(key)) || (await store.claimMeta(key, make()));
  const secret = () => randomBytes(32).toString('hex');
  return {
    installationId: await claim('installation_id', () => ids.randomId(8)),
    ownerKey: await claim('derived_owner_key', secret),
    cursorSecret: await claim('list_cursor_secret', secret),
    previewSecret: await claim('preview_secret', secret),
  };
}
