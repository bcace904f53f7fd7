import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { loadConfig, redactConfig, secretValues, type SbxConfig } from '../../src/config/index.js';

let dir: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-config-secrets-'));
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const registryHeader = Buffer.from(
  JSON.stringify({ username: 'bob', password: 'reg-password-1', serveraddress: 'registry.example' }),
).toString('base64');

async function loaded(overrides: Record<string, unknown>): Promise<SbxConfig> {
  return (await loadConfig({ cwd: dir, home: dir, env: {}, overrides: overrides as never })).config;
}

describe('secretValues', () => {
  it('collects every configured secret, including map values, rotation keys, DSN password and registry credentials', async () => {
    const config = await loaded({
      auth: {
        enabled: true,
        api_key: 'api-key-1',
        admin_api_key: 'admin-key-1',
        worker_token: 'shared-token-1',
        worker_tokens: { 'worker-a': 'tok-a', b: 'tok-b' },
        worker_signing_key: 'sign-1',
        worker_signing_keys: ['sign-old-1', 'sign-old-2'],
        worker_revoked_token_ids: ['jti-not-secret'],
      },
      database: { driver: 'postgres', dsn: 'postgres://sbx:db%20pass@db.example:5432/sbx' },
      providers: {
        hosted: { base_url: 'https://hosted.example', api_key: 'hosted-key-1' },
        custom_http: { base_url: 'http://custom.example', api_key: 'custom-token-1' },
        docker: { registry_auth: registryHeader },
      },
    });
    expect(secretValues(config).sort()).toEqual(
      [
        'api-key-1',
        'admin-key-1',
        'shared-token-1',
        'tok-a',
        'tok-b',
        'sign-1',
        'sign-old-1',
        'sign-old-2',
        'postgres://sbx:db%20pass@db.example:5432/sbx',
        'db pass',
        'hosted-key-1',
        'custom-token-1',
        registryHeader,
        'reg-password-1',
      ].sort(),
    );
  });

  it('takes the password fields of an object registry_auth and a key=value DSN', async () => {
    const config = await loaded({
      database: { driver: 'postgres', dsn: "host=db user=sbx password='p w' dbname=sbx" },
      providers: {
        docker: { registry_auth: { username: 'bob', password: 'reg-pw', serveraddress: 'r.example', identitytoken: 'id-tok' } },
      },
    });
    expect(secretValues(config).sort()).toEqual(["host=db user=sbx password='p w' dbname=sbx", 'id-tok', 'p w', 'reg-pw'].sort());
  });

  it('is empty for the defaults', async () => {
    expect(secretValues(await loaded({}))).toEqual([]);
  });
});

describe('redactConfig', () => {
  it('replaces every secret with [redacted], keeps the rest and leaves the original untouched', async () => {
    const config = await loaded({
      auth: {
        enabled: true,
        api_key: 'api-key-1',
        admin_api_key: 'admin-key-1',
        worker_tokens: { 'worker-a': 'tok-a' },
        worker_signing_keys: ['sign-old-1'],
        worker_revoked_token_ids: ['jti-1'],
      },
      database: { driver: 'postgres', dsn: 'postgres://sbx:secretpw@db.example/sbx' },
      providers: { docker: { registry_auth: { username: 'bob', password: 'reg-pw' } }, hosted: { api_key: 'hosted-key-1' } },
    });
    const red = redactConfig(config);
    expect(red.auth.api_key).toBe('[redacted]');
    expect(red.auth.admin_api_key).toBe('[redacted]');
    expect(red.auth.worker_token).toBeUndefined();
    expect(red.auth.worker_tokens).toEqual({ 'worker-a': '[redacted]' });
    expect(red.auth.worker_signing_keys).toEqual(['[redacted]']);
    expect(red.auth.worker_revoked_token_ids).toEqual(['jti-1']);
    expect(red.database.dsn).toBe('postgres://sbx:[redacted]@db.example/sbx');
    expect(red.providers.docker.registry_auth).toBe('[redacted]');
    expect(red.providers.hosted.api_key).toBe('[redacted]');
    expect(red.server.port).toBe(config.server.port);
    const text = JSON.stringify(red);
    for (const s of secretValues(config)) expect(text).not.toContain(s);
    expect(config.auth.api_key).toBe('api-key-1');
    expect(config.database.dsn).toBe('postgres://sbx:secretpw@db.example/sbx');
  });

  it('redacts a DSN that is not a URL as a whole', async () => {
    const config = await loaded({ database: { driver: 'postgres', dsn: 'host=db password=pw' } });
    expect(redactConfig(config).database.dsn).toBe('[redacted]');
  });
});

describe('blank credentials', () => {
  const failLoad = (opts: Parameters<typeof loadConfig>[0]) =>
    loadConfig({ cwd: dir, home: dir, env: {}, ...opts }).then(
      () => [] as string[],
      (e: { problems?: string[] }) => e.problems ?? [],
    );

  it('reports a whitespace-only API key from env with the other problems, never echoing it', async () => {
    const problems = await failLoad({ env: { SVC_AUTH_ENABLED: 'true', SVC_AUTH_API_KEY: '   ', SVC_SERVER_PORT: '-1' } });
    expect(problems).toEqual([
      'server.port: must be between 0 and 65535, got -1 (from SVC_SERVER_PORT)',
      'auth.api_key: is blank (only whitespace); set a real value or remove the key (from SVC_AUTH_API_KEY)',
    ]);
  });

  it('reports blank admin keys, worker tokens (shared and per worker) and signing keys, each by key', async () => {
    const file = join(dir, 'sbx.yaml');
    writeFileSync(
      file,
      [
        'auth:',
        '  enabled: true',
        '  api_key: real-key-1',
        '  admin_api_key: "\\t "',
        '  worker_token: " "',
        '  worker_tokens:',
        '    w1: ok-token',
        '    w2: "  "',
        '  worker_signing_key: "  "',
        '  worker_signing_keys: ["old-key", ""]',
        '',
      ].join('\n'),
    );
    expect(await failLoad({})).toEqual([
      `auth.admin_api_key: is blank (only whitespace); set a real value or remove the key (from ${file})`,
      `auth.worker_token: is blank (only whitespace); set a real value or remove the key (from ${file})`,
      `auth.worker_tokens.w2: is blank; set a real value or remove the key (from ${file})`,
      `auth.worker_signing_key: is blank (only whitespace); set a real value or remove the key (from ${file})`,
      `auth.worker_signing_keys[1]: is blank; set a real value or remove the key (from ${file})`,
    ]);
  });

  it('reports a whitespace-only secret file as empty', async () => {
    const keyFile = join(dir, 'api.key');
    writeFileSync(keyFile, ' \n\t\n');
    expect(await failLoad({ overrides: { auth: { enabled: true, api_key_file: keyFile } } })).toEqual([
      `auth.api_key_file: secret file ${keyFile} is empty (from overrides)`,
    ]);
  });

  it('keeps an empty admin key meaning "fall back to api_key" and an overridden blank value harmless', async () => {
    const file = join(dir, 'sbx.yaml');
    writeFileSync(file, 'auth:\n  api_key: "  "\n  admin_api_key: ""\n');
    const { config } = await loadConfig({ cwd: dir, home: dir, env: { SVC_AUTH_API_KEY: 'env-key-1' } });
    expect(config.auth.api_key).toBe('env-key-1');
    expect(config.auth.admin_api_key).toBe('');
  });
});
