/** Secrets (DESIGN.md §15): what the store keeps of them. Values only ever encrypted; re-exported by ports.ts. */

/** One secret of one owner. `owner_key` is the owner id, '' for none. */
export interface SecretRecord {
  owner_key: string;
  name: string;
  /** `v1:` + base64(nonce ‖ ciphertext ‖ tag): AES-256-GCM, the owner and name as associated data. */
  ciphertext: string;
  /** Egress rules (§10 syntax, canonical text) naming the hosts the value may go to. */
  hosts: string[];
  allow_plain_http: boolean;
  /** First 8 hex of a keyed hash of the value. */
  fingerprint: string;
  created_at: string;
  updated_at: string;
}

/** A secret bound to a sandbox at spawn: the variable `name` holds `placeholder` inside it. */
export interface SecretBinding {
  sandbox_id: string;
  owner_key: string;
  name: string;
  placeholder: string;
}

/** A binding with its secret's current row (absent when the secret was deleted). */
export interface BoundSecretRow {
  binding: SecretBinding;
  secret: SecretRecord | null;
}

export interface SecretStore {
  /** `conflict` when the owner already has a secret of that name. */
  insertSecret(rec: SecretRecord): Promise<void>;
  getSecret(ownerKey: string, name: string): Promise<SecretRecord | null>;
  /** Sorted by owner, then name; every owner's when `ownerKey` is null. */
  listSecrets(ownerKey: string | null): Promise<SecretRecord[]>;
  /** Changes value (ciphertext and fingerprint), hosts and/or allow_plain_http; null when absent. */
  updateSecret(
    ownerKey: string,
    name: string,
    patch: Partial<Pick<SecretRecord, 'ciphertext' | 'fingerprint' | 'hosts' | 'allow_plain_http'>> & { updated_at: string },
  ): Promise<SecretRecord | null>;
  deleteSecret(ownerKey: string, name: string): Promise<boolean>;
  countSecrets(): Promise<number>;
  insertSecretBindings(bindings: readonly SecretBinding[]): Promise<void>;
  /** Removes a sandbox's bindings (a fork that could not be made); how many went. */
  deleteSecretBindings(sandboxId: string): Promise<number>;
  /** A sandbox's bindings, sorted by name, each with its secret's current row. */
  secretBindings(sandboxId: string): Promise<BoundSecretRow[]>;
}
