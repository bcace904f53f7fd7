import { describe, expect, it } from 'vitest';
import type { SecretRecord } from '../../src/core/ports/index.js';
import { at, template, type ContractContext } from './store-fixtures.js';

const secret = (owner: string, name: string, over: Partial<SecretRecord> = {}): SecretRecord => ({
  owner_key: owner,
  name,
  ciphertext: `v1:${owner}-${name}`,
  hosts: ['api.example.com', '*.example.org:443'],
  allow_plain_http: false,
  fingerprint: '0a1b2c3d',
  created_at: at(0),
  updated_at: at(0),
  ...over,
});

/** Secrets and their bindings (migration 16): one namespace per owner; a binding sees its secret's current row. */
export function secretsContract(ctx: ContractContext): void {
  describe('secrets', () => {
    it('keeps one namespace per owner: insert, conflict, get, list, update, delete, count', async () => {
      await ctx.store.insertSecret(secret('alice', 'TOKEN'));
      await ctx.store.insertSecret(secret('bob', 'TOKEN', { allow_plain_http: true }));
      await ctx.store.insertSecret(secret('', 'A_FIRST'));
      await expect(ctx.store.insertSecret(secret('alice', 'TOKEN'))).rejects.toMatchObject({ code: 'conflict' });
      expect(await ctx.store.getSecret('alice', 'TOKEN')).toEqual(secret('alice', 'TOKEN'));
      expect(await ctx.store.getSecret('bob', 'TOKEN')).toEqual(secret('bob', 'TOKEN', { allow_plain_http: true }));
      expect(await ctx.store.getSecret('carol', 'TOKEN')).toBeNull();
      expect((await ctx.store.listSecrets('alice')).map((s) => s.name)).toEqual(['TOKEN']);
      expect((await ctx.store.listSecrets(null)).map((s) => `${s.owner_key}/${s.name}`)).toEqual(['/A_FIRST', 'alice/TOKEN', 'bob/TOKEN']);
      expect(await ctx.store.countSecrets()).toBe(3);

      const hostsOnly = await ctx.store.updateSecret('alice', 'TOKEN', { hosts: ['other.test'], updated_at: at(5) });
      expect(hostsOnly).toEqual(secret('alice', 'TOKEN', { hosts: ['other.test'], updated_at: at(5) }));
      const value = await ctx.store.updateSecret('alice', 'TOKEN', {
        ciphertext: 'v1:new',
        fingerprint: 'ffffffff',
        allow_plain_http: true,
        updated_at: at(6),
      });
      expect(value).toMatchObject({ ciphertext: 'v1:new', fingerprint: 'ffffffff', allow_plain_http: true, hosts: ['other.test'] });
      expect(await ctx.store.updateSecret('carol', 'TOKEN', { updated_at: at(7) })).toBeNull();
      expect(await ctx.store.deleteSecret('alice', 'TOKEN')).toBe(true);
      expect(await ctx.store.deleteSecret('alice', 'TOKEN')).toBe(false);
      expect(await ctx.store.getSecret('bob', 'TOKEN')).not.toBeNull();
    });

    it("binds sandboxes to secrets: each binding with its secret's current row, none once it is deleted", async () => {
      await ctx.store.insertSecret(secret('alice', 'B_ONE'));
      await ctx.store.insertSecret(secret('alice', 'A_TWO'));
      await ctx.store.insertSecretBindings([
        { sandbox_id: 'sb-1', owner_key: 'alice', name: 'B_ONE', placeholder: 'sbx_secret_1' },
        { sandbox_id: 'sb-1', owner_key: 'alice', name: 'A_TWO', placeholder: 'sbx_secret_2' },
        { sandbox_id: 'sb-2', owner_key: 'alice', name: 'B_ONE', placeholder: 'sbx_secret_3' },
      ]);
      const rows = await ctx.store.secretBindings('sb-1');
      expect(rows.map((r) => [r.binding.name, r.binding.placeholder, r.secret?.ciphertext])).toEqual([
        ['A_TWO', 'sbx_secret_2', 'v1:alice-A_TWO'],
        ['B_ONE', 'sbx_secret_1', 'v1:alice-B_ONE'],
      ]);
      await ctx.store.updateSecret('alice', 'B_ONE', { ciphertext: 'v1:rotated', fingerprint: '12345678', updated_at: at(9) });
      expect((await ctx.store.secretBindings('sb-2'))[0]?.secret?.ciphertext).toBe('v1:rotated');
      await ctx.store.deleteSecret('alice', 'B_ONE');
      expect((await ctx.store.secretBindings('sb-2'))[0]?.secret).toBeNull();
      expect(await ctx.store.secretBindings('sb-none')).toEqual([]);
      expect(await ctx.store.deleteSecretBindings('sb-1')).toBe(2);
      expect(await ctx.store.secretBindings('sb-1')).toEqual([]);
      expect(await ctx.store.deleteSecretBindings('sb-1')).toBe(0);
    });

    it("keeps a template's secrets", async () => {
      await ctx.store.createTemplate(template('with-secrets', { network: 'filtered', secrets: ['A', 'B'] }));
      expect((await ctx.store.getTemplate('with-secrets'))?.secrets).toEqual(['A', 'B']);
      const updated = await ctx.store.updateTemplate('with-secrets', { ...template('with-secrets'), secrets: null, updated_at: at(3) });
      expect(updated?.secrets).toBeUndefined();
    });
  });
}
