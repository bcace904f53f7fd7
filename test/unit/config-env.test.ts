import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { envName, leafEntries, loadConfig } from '../../src/config/index.js';
import { dirs, problemsOf, useConfigDirs, write } from './config-fixture.js';

useConfigDirs();
let root = '';
let home = '';
let cwd = '';
beforeEach(() => {
  ({ root, home, cwd } = dirs);
});

describe('SVC_ environment mapping', () => {
  it('maps every schema key to one distinct variable name', () => {
    const names = leafEntries().map((e) => envName(e.path));
    expect(new Set(names).size).toBe(names.length);
    expect(envName('auth.api_key')).toBe('SVC_AUTH_API_KEY');
    expect(envName(['providers', 'custom_http', 'api_key_file'])).toBe('SVC_PROVIDERS_CUSTOM_HTTP_API_KEY_FILE');
  });

  it('resolves names with underscores inside keys and converts booleans, integers, numbers and lists', async () => {
    const { config } = await loadConfig({
      cwd,
      home,
      env: {
        SVC_DEFAULTS_MAX_TTL: '48h',
        SVC_AUTH_API_KEY: 'k-from-env',
        SVC_AUTH_ENABLED: 'true',
        SVC_RATE_LIMIT_ENABLED: '1',
        SVC_RATE_LIMIT_KEY_BY: 'ip',
        SVC_RATE_LIMIT_REQUESTS_PER_MINUTE: '600',
        SVC_SERVER_CORS_ALLOWED_ORIGINS: 'https://a.example, https://b.example',
        SVC_DEFAULTS_MAX_FILE_MB: '1.5',
        SVC_PROVIDERS_CUSTOM_HTTP_BASE_URL: 'http://127.0.0.1:9000',
        SVC_PROVIDERS_DOCKER_READ_ONLY_ROOTFS: '0',
        SVC_PROVIDERS_DOCKER_AGENT: 'off',
        SVC_WORKER_RPC_TLS_INSECURE_SKIP_VERIFY: 'TRUE',
        SVC_AUTH_WORKER_REVOKED_TOKEN_IDS: 'j1,j2',
        SVC_NOT_A_KEY: 'ignored',
        SVC_SERVER: 'ignored too',
        SVC_DEFAULTS_IMAGE: '', // empty means not set
      },
    });
    expect(config.defaults.max_ttl).toBe('48h');
    expect(config.auth.api_key).toBe('k-from-env');
    expect(config.auth.enabled).toBe(true);
    expect(config.rate_limit.enabled).toBe(true);
    expect(config.rate_limit.key_by).toBe('ip');
    expect(config.rate_limit.requests_per_minute).toBe(600);
    expect(config.server.cors_allowed_origins).toEqual(['https://a.example', 'https://b.example']);
    expect(config.defaults.max_file_mb).toBe(1.5);
    expect(config.providers.custom_http.base_url).toBe('http://127.0.0.1:9000');
    expect(config.providers.docker.read_only_rootfs).toBe(false);
    expect(config.providers.docker.agent).toBe('off');
    expect(config.worker.rpc_tls.insecure_skip_verify).toBe(true);
    expect(config.auth.worker_revoked_token_ids).toEqual(['j1', 'j2']);
    expect(config.defaults.image).toBe('debian:bookworm-slim');
  });

  it('builds auth.worker_tokens from JSON and per-entry variables, merged over file entries', async () => {
    write(join(cwd, 'sbx.yaml'), 'auth:\n  worker_tokens:\n    from-file: tok-file\n    w2: overridden\n');
    const { config } = await loadConfig({
      cwd,
      home,
      env: {
        SVC_AUTH_WORKER_TOKENS: JSON.stringify({ 'worker-a': 'tok-a', w2: 'tok-json' }),
        SVC_AUTH_WORKER_TOKENS_W2: 'tok-w2',
        SVC_AUTH_WORKER_TOKENS_NODE_7: 'tok-n7',
      },
    });
    expect(config.auth.worker_tokens).toEqual({ 'from-file': 'tok-file', 'worker-a': 'tok-a', w2: 'tok-w2', node_7: 'tok-n7' });
  });

  it('reports env values that fail validation, naming the variable and hiding secrets', async () => {
    const problems = await problemsOf(
      loadConfig({
        cwd,
        home,
        env: {
          SVC_SERVER_PORT: 'abc',
          SVC_RATE_LIMIT_ENABLED: 'yes',
          SVC_DEFAULTS_SPAWN_OVERFLOW: 'drop',
          SVC_AUTH_WORKER_TOKENS: '{not json: s3cret-token}',
          SVC_DEFAULTS_MAX_SANDBOXES: '-2',
        },
      }),
    );
    expect(problems).toEqual([
      'auth.worker_tokens: expected a JSON object of names to strings (value not shown) (from SVC_AUTH_WORKER_TOKENS)',
      'defaults.max_sandboxes: must not be negative, got -2 (from SVC_DEFAULTS_MAX_SANDBOXES)',
      'defaults.spawn_overflow: must be one of reject, queue; got "drop" (from SVC_DEFAULTS_SPAWN_OVERFLOW)',
      'rate_limit.enabled: expected true or false, got "yes" (from SVC_RATE_LIMIT_ENABLED)',
      'server.port: expected an integer, got "abc" (from SVC_SERVER_PORT)',
    ]);
    expect(problems.join('\n')).not.toContain('s3cret');
  });
});

describe('secret _file twins', () => {
  it('reads each secret from its file, trimmed', async () => {
    const dir = join(root, 'secrets');
    mkdirSync(dir);
    write(join(dir, 'api'), '  api-key-from-file-0123456789abcdef\n');
    write(join(dir, 'admin'), 'admin-from-file\n');
    write(join(dir, 'worker'), 'worker-shared\n');
    write(join(dir, 'signing'), 'signing-key\n');
    write(join(dir, 'dsn'), 'postgres://sbx:pw@db/sbx\n');
    write(join(dir, 'hosted'), 'hosted-key\n');
    write(join(dir, 'custom'), 'custom-token\n');
    write(
      join(cwd, 'sbx.yaml'),
      [
        'auth:',
        '  enabled: true',
        `  api_key_file: ${join(dir, 'api')}`,
        `  admin_api_key_file: ${join(dir, 'admin')}`,
        '  worker_signing_key_file: ../../secrets/signing',
        'providers:',
        '  hosted:',
        `    api_key_file: ${join(dir, 'hosted')}`,
        '  custom_http:',
        `    api_key_file: ${join(dir, 'custom')}`,
        '',
      ].join('\n'),
    );
    const { config } = await loadConfig({
      cwd,
      home,
      env: { SVC_AUTH_WORKER_TOKEN_FILE: join(dir, 'worker'), SVC_DATABASE_DSN_FILE: join(dir, 'dsn'), SVC_DATABASE_DRIVER: 'postgres' },
    });
    expect(config.auth.api_key).toBe('api-key-from-file-0123456789abcdef');
    expect(config.auth.api_key_file).toBe(join(dir, 'api'));
    expect(config.auth.admin_api_key).toBe('admin-from-file');
    expect(config.auth.worker_token).toBe('worker-shared');
    expect(config.auth.worker_signing_key).toBe('signing-key');
    expect(config.auth.worker_signing_key_file).toBe(join(dir, 'signing'));
    expect(config.database.dsn).toBe('postgres://sbx:pw@db/sbx');
    expect(config.providers.hosted.api_key).toBe('hosted-key');
    expect(config.providers.custom_http.api_key).toBe('custom-token');
  });

  it('rejects an inline secret set together with its file, naming both sources', async () => {
    const keyFile = write(join(root, 'key'), 'from-file');
    const file = write(join(home, '.sbx', 'config.yaml'), 'auth:\n  api_key: inline-secret-value\n');
    const problems = await problemsOf(
      loadConfig({
        cwd,
        home,
        env: { SVC_AUTH_API_KEY_FILE: keyFile, SVC_PROVIDERS_CUSTOM_HTTP_API_KEY: 't', SVC_PROVIDERS_CUSTOM_HTTP_API_KEY_FILE: keyFile },
      }),
    );
    expect(problems).toEqual([
      `auth.api_key: set together with auth.api_key_file; set only one of them (from ${file} and SVC_AUTH_API_KEY_FILE)`,
      'providers.custom_http.api_key: set together with providers.custom_http.api_key_file; set only one of ' +
        'them (from SVC_PROVIDERS_CUSTOM_HTTP_API_KEY and SVC_PROVIDERS_CUSTOM_HTTP_API_KEY_FILE)',
    ]);
    expect(problems.join('\n')).not.toContain('inline-secret-value');
  });

  it('reports missing, unreadable and empty secret files by path, never by content', async () => {
    const missing = join(root, 'missing');
    const empty = write(join(root, 'empty'), '  \n');
    const secretDir = join(root, 'a-directory');
    mkdirSync(secretDir);
    const problems = await problemsOf(
      loadConfig({
        cwd,
        home,
        env: { SVC_AUTH_API_KEY_FILE: missing, SVC_AUTH_ADMIN_API_KEY_FILE: empty, SVC_AUTH_WORKER_TOKEN_FILE: secretDir },
      }),
    );
    expect(problems).toEqual([
      `auth.api_key_file: secret file ${missing} does not exist (from SVC_AUTH_API_KEY_FILE)`,
      `auth.admin_api_key_file: secret file ${empty} is empty (from SVC_AUTH_ADMIN_API_KEY_FILE)`,
      `auth.worker_token_file: secret file ${secretDir} cannot be read (EISDIR) (from SVC_AUTH_WORKER_TOKEN_FILE)`,
    ]);
  });
});
