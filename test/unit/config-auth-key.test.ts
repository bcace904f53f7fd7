import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/index.js';

const KEY = 'user-key-0123456789abcdef0123456789abcdef';
const ADMIN = 'admin-key-0123456789abcdef0123456789abcdef';

describe('a configured key switches auth on (DESIGN §3 "Auth")', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-auth-key-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));
  const load = (env: Record<string, string>, yaml?: string) => {
    if (yaml !== undefined) writeFileSync(join(dir, 'sbx.yaml'), yaml);
    return loadConfig({ cwd: dir, home: dir, env });
  };

  it('SVC_AUTH_API_KEY with auth.enabled unset → enabled, with a note naming the source and no secret', async () => {
    const { config, notes } = await load({ SVC_AUTH_API_KEY: KEY });
    expect(config.auth.enabled).toBe(true);
    expect(notes).toEqual([
      {
        level: 'info',
        key: 'auth.enabled',
        message: 'auth on: auth.api_key is set (from SVC_AUTH_API_KEY) and auth.enabled is unset, so every API route needs X-API-Key',
      },
    ]);
    expect(JSON.stringify(notes)).not.toContain(KEY);
  });

  it('auth.api_key_file set (in a file) → enabled', async () => {
    const keyFile = join(dir, 'key');
    writeFileSync(keyFile, `${KEY}\n`);
    const { config, notes } = await load({}, `auth:\n  api_key_file: ${keyFile}\n`);
    expect(config.auth.enabled).toBe(true);
    expect(config.auth.api_key).toBe(KEY);
    expect(notes[0]!.message).toBe(
      `auth on: auth.api_key_file is set (from ${join(dir, 'sbx.yaml')}) and auth.enabled is unset, so every API route needs X-API-Key`,
    );
  });

  it('an admin key alone leaves auth off (it protects only the admin routes) and loads cleanly', async () => {
    const { config, notes } = await load({ SVC_AUTH_ADMIN_API_KEY: ADMIN });
    expect(config.auth.enabled).toBe(false);
    expect(config.auth.admin_api_key).toBe(ADMIN);
    expect(notes).toEqual([]);
  });

  it('an explicit false beside a key stays false and warns, naming both sources', async () => {
    const { config, notes } = await load({ SVC_AUTH_API_KEY: KEY }, 'auth:\n  enabled: false\n');
    expect(config.auth.enabled).toBe(false);
    expect(notes).toEqual([
      {
        level: 'warn',
        key: 'auth.enabled',
        message:
          `auth.enabled is false (from ${join(dir, 'sbx.yaml')}) although auth.api_key is set (from ` +
          `SVC_AUTH_API_KEY): the key is ignored and the API is open; remove auth.enabled: false to turn auth on`,
      },
    ]);
  });

  it('an explicit true stays true; no key and no enabled stays the open default', async () => {
    expect((await load({ SVC_AUTH_API_KEY: KEY, SVC_AUTH_ENABLED: 'true' })).notes).toEqual([]);
    const open = await load({});
    expect(open.config.auth.enabled).toBe(false);
    expect(open.notes).toEqual([]);
  });

  it('explicit true with only an admin key is still refused (no user key to check)', async () => {
    await expect(load({ SVC_AUTH_ADMIN_API_KEY: ADMIN, SVC_AUTH_ENABLED: 'true' })).rejects.toThrow(ConfigError);
  });
});
