import { conflict } from '../../../core/errors.js';
import type { BoundSecretRow, SecretBinding, SecretRecord, SecretStore } from '../../../core/ports/index.js';
import type { Row } from '../shared/records.js';
import type { SqlDriver } from './driver.js';

const COLUMNS = ['owner_key', 'name', 'ciphertext', 'hosts', 'allow_plain_http', 'fingerprint', 'created_at', 'updated_at'] as const;
const LIST = COLUMNS.join(', ');

function fromRow(r: Row, prefix = ''): SecretRecord {
  const get = (c: string) => r[`${prefix}${c}`];
  return {
    owner_key: String(get('owner_key')),
    name: String(get('name')),
    ciphertext: String(get('ciphertext')),
    hosts: JSON.parse(String(get('hosts'))) as string[],
    allow_plain_http: Number(get('allow_plain_http')) === 1,
    fingerprint: String(get('fingerprint')),
    created_at: String(get('created_at')),
    updated_at: String(get('updated_at')),
  };
}

function values(rec: SecretRecord): unknown[] {
  return [
    rec.owner_key,
    rec.name,
    rec.ciphertext,
    JSON.stringify(rec.hosts),
    rec.allow_plain_http ? 1 : 0,
    rec.fingerprint,
    rec.created_at,
    rec.updated_at,
  ];
}

/** The SecretStore role over a SqlDriver (tables of migration 16). */
export class SqlSecrets implements SecretStore {
  constructor(private readonly sql: SqlDriver) {}

  async insertSecret(rec: SecretRecord): Promise<void> {
    const n = await this.sql.count(
      `INSERT INTO secrets (${LIST}) VALUES (${COLUMNS.map(() => '?').join(', ')}) ON CONFLICT (owner_key, name) DO NOTHING`,
      values(rec),
    );
    if (n === 0) throw conflict(`secret ${rec.name} already exists`);
  }

  async getSecret(ownerKey: string, name: string): Promise<SecretRecord | null> {
    const rows = await this.sql.rows(`SELECT ${LIST} FROM secrets WHERE owner_key = ? AND name = ?`, [ownerKey, name]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async listSecrets(ownerKey: string | null): Promise<SecretRecord[]> {
    const rows =
      ownerKey === null
        ? await this.sql.rows(`SELECT ${LIST} FROM secrets ORDER BY owner_key, name`)
        : await this.sql.rows(`SELECT ${LIST} FROM secrets WHERE owner_key = ? ORDER BY name`, [ownerKey]);
    return rows.map((r) => fromRow(r));
  }

  async updateSecret(
    ownerKey: string,
    name: string,
    patch: Partial<Pick<SecretRecord, 'ciphertext' | 'fingerprint' | 'hosts' | 'allow_plain_http'>> & { updated_at: string },
  ): Promise<SecretRecord | null> {
    const sets: string[] = ['updated_at = ?'];
    const params: unknown[] = [patch.updated_at];
    if (patch.ciphertext !== undefined && patch.fingerprint !== undefined) {
      sets.push('ciphertext = ?', 'fingerprint = ?');
      params.push(patch.ciphertext, patch.fingerprint);
    }
    if (patch.hosts !== undefined) {
      sets.push('hosts = ?');
      params.push(JSON.stringify(patch.hosts));
    }
    if (patch.allow_plain_http !== undefined) {
      sets.push('allow_plain_http = ?');
      params.push(patch.allow_plain_http ? 1 : 0);
    }
    const rows = await this.sql.rows(`UPDATE secrets SET ${sets.join(', ')} WHERE owner_key = ? AND name = ? RETURNING ${LIST}`, [
      ...params,
      ownerKey,
      name,
    ]);
    return rows[0] ? fromRow(rows[0]) : null;
  }

  async deleteSecret(ownerKey: string, name: string): Promise<boolean> {
    return (await this.sql.count('DELETE FROM secrets WHERE owner_key = ? AND name = ?', [ownerKey, name])) > 0;
  }

  async countSecrets(): Promise<number> {
    const rows = await this.sql.rows('SELECT COUNT(*) AS n FROM secrets');
    return Number(rows[0]?.n ?? 0);
  }

  async insertSecretBindings(bindings: readonly SecretBinding[]): Promise<void> {
    for (const b of bindings) {
      await this.sql.count('INSERT INTO secret_bindings (sandbox_id, name, owner_key, placeholder) VALUES (?, ?, ?, ?)', [
        b.sandbox_id,
        b.name,
        b.owner_key,
        b.placeholder,
      ]);
    }
  }

  async deleteSecretBindings(sandboxId: string): Promise<number> {
    return this.sql.count('DELETE FROM secret_bindings WHERE sandbox_id = ?', [sandboxId]);
  }

  async secretBindings(sandboxId: string): Promise<BoundSecretRow[]> {
    const rows = await this.sql.rows(
      `SELECT b.sandbox_id AS b_sandbox_id, b.name AS b_name, b.owner_key AS b_owner_key, b.placeholder AS b_placeholder,
        ${COLUMNS.map((c) => `s.${c} AS s_${c}`).join(', ')}
        FROM secret_bindings b LEFT JOIN secrets s ON s.owner_key = b.owner_key AND s.name = b.name
        WHERE b.sandbox_id = ? ORDER BY b.name`,
      [sandboxId],
    );
    return rows.map((r) => ({
      binding: {
        sandbox_id: String(r.b_sandbox_id),
        name: String(r.b_name),
        owner_key: String(r.b_owner_key),
        placeholder: String(r.b_placeholder),
      },
      secret: r.s_name == null ? null : fromRow(r, 's_'),
    }));
  }
}
