/**
 * Version 16 (DESIGN.md §15): secrets, encrypted at rest (the value only as AES-256-GCM ciphertext),
 * one namespace per owner ('' for none); the bindings of sandboxes to secrets (a placeholder per
 * binding); the secrets a template's spawns bind (JSON names, null for none).
 */
export const secretsTables = (key: string) => `
  CREATE TABLE IF NOT EXISTS secrets (
    owner_key ${key} NOT NULL,
    name ${key} NOT NULL,
    ciphertext TEXT NOT NULL,
    hosts TEXT NOT NULL,
    allow_plain_http INTEGER NOT NULL,
    fingerprint TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (owner_key, name)
  );
  CREATE TABLE IF NOT EXISTS secret_bindings (
    sandbox_id ${key} NOT NULL,
    name ${key} NOT NULL,
    owner_key ${key} NOT NULL,
    placeholder TEXT NOT NULL,
    PRIMARY KEY (sandbox_id, name)
  );
  ALTER TABLE templates ADD COLUMN secrets TEXT;
`;
