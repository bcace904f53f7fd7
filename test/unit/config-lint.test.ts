import { describe, expect, it } from 'vitest';
import { defaultConfig, lintConfig, type LintFinding, type SbxConfig } from '../../src/config/index.js';
import { describeGuard } from '../../src/config/lint.js';

const STRONG = 'k'.repeat(32);
const STRONG2 = 'a'.repeat(40);

/** A config that lints clean in production; each test breaks one thing. */
function hardened(): SbxConfig {
  const c = defaultConfig();
  c.auth.enabled = true;
  c.auth.api_key = STRONG;
  c.auth.admin_api_key = STRONG2;
  c.server.cors_allowed_origins = ['https://app.example.com'];
  return c;
}

const keysOf = (f: LintFinding[]) => f.map((x) => `${x.level} ${x.key}`);

describe('lintConfig', () => {
  it('a secrets key the server would refuse fails; a long enough one is clean', () => {
    const c = hardened();
    c.auth.secrets_key = 'too-short';
    expect(keysOf(lintConfig(c, { production: false }))).toContain('fail auth.secrets_key');
    c.auth.secrets_key = 's'.repeat(32);
    expect(keysOf(lintConfig(c, { production: true }))).not.toContain('fail auth.secrets_key');
  });

  it(
    'replicas with local workers (DESIGN §7): a loopback advertise URL with a remote database fails, plain ' + 'http between hosts warns',
    () => {
      const c = hardened();
      c.database.driver = 'postgres';
      c.database.dsn = 'postgres://sbx:pw@db.internal:5432/sbx';
      // The default host 127.0.0.1 advertises http://127.0.0.1:7423: the other replicas cannot reach it.
      const loop = lintConfig(c, { production: true }).filter((f) => f.key === 'server.advertise_url');
      expect(loop.map((f) => f.level)).toEqual(['fail']);
      expect(loop[0]!.message).toMatch(/loopback/);
      c.server.advertise_url = 'http://localhost:7423';
      expect(keysOf(lintConfig(c, { production: true }))).toEqual(['fail server.advertise_url']);
      c.server.advertise_url = '';
      c.server.host = '10.0.0.5';
      expect(keysOf(lintConfig(c, { production: true }))).toEqual(['warn server.advertise_url']);
      c.server.advertise_url = 'https://cp1.internal:7423';
      expect(lintConfig(c, { production: true })).toEqual([]);
      // The database on this host, a pure control plane, or SQLite: nothing to say.
      c.server.advertise_url = '';
      c.server.host = '127.0.0.1';
      c.database.dsn = 'postgres://sbx:pw@127.0.0.1:5432/sbx';
      expect(lintConfig(c, { production: true })).toEqual([]);
      c.database.dsn = 'host=db.internal dbname=sbx';
      expect(keysOf(lintConfig(c, { production: true }))).toEqual(['fail server.advertise_url']);
      c.server.local_worker = false;
      expect(lintConfig(c, { production: true })).toEqual([]);
    },
  );

  it('passes a hardened config in production', () => {
    expect(lintConfig(hardened(), { production: true })).toEqual([]);
  });

  it('fails auth disabled and wildcard CORS in production, warns outside it (the defaults)', () => {
    expect(keysOf(lintConfig(defaultConfig(), { production: true }))).toEqual([
      'fail auth.enabled',
      'fail server.ui',
      'fail server.mcp',
      'fail server.e2b',
      'fail server.cors_allowed_origins',
    ]);
    const noUi = defaultConfig();
    noUi.server.ui = false;
    noUi.server.mcp = false;
    noUi.server.e2b = false;
    expect(keysOf(lintConfig(noUi, { production: true }))).toEqual(['fail auth.enabled', 'fail server.cors_allowed_origins']);
    const dev = lintConfig(defaultConfig(), { production: false });
    expect(keysOf(dev)).toEqual(['warn auth.enabled', 'warn server.cors_allowed_origins']);
    expect(dev[0]).toEqual({
      level: 'warn',
      key: 'auth.enabled',
      message: `auth is disabled: anyone who can reach the API can create sandboxes and run commands; ${describeGuard(defaultConfig())}`,
      fix: 'set auth.api_key_file (or SVC_AUTH_API_KEY_FILE): a configured key turns auth on',
    });
    expect(dev[0]!.message).toContain(
      "dev-box guard on: browser origins limited to localhost, 127.0.0.0/8, [::1], the server's own origin; " +
        'Host limited to IP addresses, localhost, ',
    );
    expect(dev[1]!.message).toBe(
      'server.cors_allowed_origins contains the wildcard "*": any web page may call the API from a browser ' +
        'once auth is on (while auth is off the dev-box guard ignores the wildcard)',
    );
    const on = hardened();
    on.server.cors_allowed_origins = ['*'];
    expect(lintConfig(on, { production: false })[0]!.message).toBe(
      'server.cors_allowed_origins contains the wildcard "*": any web page may call the API from a browser',
    );
  });

  it('fails an empty CORS list in production, saying it refuses every origin (not that it allows any)', () => {
    const c = hardened();
    c.server.cors_allowed_origins = [];
    const f = lintConfig(c, { production: true });
    expect(f).toEqual([
      {
        level: 'fail',
        key: 'server.cors_allowed_origins',
        message:
          'server.cors_allowed_origins is empty: the server refuses every origin, so no web page can call the ' +
          'API from a browser (preflights get 403)',
        fix: 'list the exact origins that need browser access, e.g. https://app.example.com; production requires an explicit list',
      },
    ]);
    expect(keysOf(lintConfig(c, { production: false }))).toEqual(['warn server.cors_allowed_origins']);
  });

  it('flags every key shorter than 32 bytes without printing it', () => {
    const c = hardened();
    c.auth.api_key = 'short-api-key';
    c.auth.admin_api_key = 'short-admin';
    c.auth.worker_tokens = { 'worker-b': 'tiny-token', 'worker-a': STRONG };
    c.auth.worker_signing_keys = ['old-sign'];
    const f = lintConfig(c, { production: true });
    expect(keysOf(f)).toEqual([
      'fail auth.api_key',
      'fail auth.admin_api_key',
      'fail auth.worker_tokens.worker-b',
      'fail auth.worker_signing_keys[0]',
    ]);
    expect(f[0]!.message).toBe('auth.api_key is shorter than 32 bytes');
    expect(keysOf(lintConfig(c, { production: false }))).toEqual([
      'warn auth.api_key',
      'warn auth.admin_api_key',
      'warn auth.worker_tokens.worker-b',
      'warn auth.worker_signing_keys[0]',
    ]);
    const text = JSON.stringify(f);
    for (const secret of ['short-api-key', 'short-admin', 'tiny-token', 'old-sign']) expect(text).not.toContain(secret);
  });

  it('counts bytes, not characters', () => {
    const c = hardened();
    c.auth.api_key = 'é'.repeat(16); // 16 characters, 32 bytes
    expect(lintConfig(c, { production: true })).toEqual([]);
  });

  it('flags an admin key equal to the API key', () => {
    const c = hardened();
    c.auth.admin_api_key = STRONG;
    expect(lintConfig(c, { production: true })).toEqual([
      {
        level: 'fail',
        key: 'auth.admin_api_key',
        message: 'auth.admin_api_key equals auth.api_key, so every API client is also an admin',
        fix: 'set a different, separately distributed admin key',
      },
    ]);
    expect(keysOf(lintConfig(c, { production: false }))).toEqual(['warn auth.admin_api_key']);
  });

  it('fails insecure_skip_verify in production and warns outside it', () => {
    const c = hardened();
    c.worker.rpc_tls.insecure_skip_verify = true;
    expect(keysOf(lintConfig(c, { production: true }))).toEqual(['fail worker.rpc_tls.insecure_skip_verify']);
    expect(keysOf(lintConfig(c, { production: false }))).toEqual(['warn worker.rpc_tls.insecure_skip_verify']);
  });

  it('warns about a shared worker token beside signed tokens, only when signing is configured', () => {
    const c = hardened();
    c.auth.worker_token = 'w'.repeat(32);
    expect(lintConfig(c, { production: true })).toEqual([]);
    c.auth.worker_signing_key = 's'.repeat(32);
    const f = lintConfig(c, { production: true });
    expect(keysOf(f)).toEqual(['warn auth.worker_token']);
    expect(f[0]!.message).toBe('a shared worker token is still accepted beside signed worker tokens');
  });

  it('warns when the active signing key is in the rotation list and when rotation keys repeat', () => {
    const c = hardened();
    const active = 's'.repeat(32);
    const old = 'o'.repeat(32);
    c.auth.worker_signing_key = active;
    c.auth.worker_signing_keys = [old, active, old];
    const f = lintConfig(c, { production: true });
    expect(keysOf(f)).toEqual(['warn auth.worker_signing_keys', 'warn auth.worker_signing_keys[2]']);
    expect(f.map((x) => x.message)).toEqual([
      'the active auth.worker_signing_key is repeated in the rotation list',
      'auth.worker_signing_keys[2] repeats an earlier rotation key',
    ]);
    expect(JSON.stringify(f)).not.toContain(old);
  });

  it('warns when no audit retention is set', () => {
    const c = hardened();
    c.auth.admin_audit_retention = '0s';
    const f = lintConfig(c, { production: true });
    expect(keysOf(f)).toEqual(['warn auth.admin_audit_retention']);
    expect(f[0]!.fix).toBe('set auth.admin_audit_retention, e.g. 720h (30 days)');
  });

  it('warns when the default TTL or exec timeout is above its maximum', () => {
    const c = hardened();
    c.defaults.ttl = '2h';
    c.defaults.max_ttl = '1h';
    c.defaults.default_exec_timeout = '20m';
    c.defaults.max_exec_timeout = '10m';
    expect(keysOf(lintConfig(c, { production: true }))).toEqual(['warn defaults.ttl', 'warn defaults.default_exec_timeout']);
    c.defaults.max_ttl = '0s'; // no maximum
    c.defaults.max_exec_timeout = '0s';
    expect(lintConfig(c, { production: true })).toEqual([]);
  });

  it('fails "null" in server.cors_allowed_origins even on a dev box, and warns about entries that are no origin', () => {
    const c = hardened();
    c.server.cors_allowed_origins = ['https://app.example.com', 'null'];
    expect(keysOf(lintConfig(c, { production: false }))).toEqual(['fail server.cors_allowed_origins']);
    c.server.cors_allowed_origins = ['https://app.example.com', 'https://app.example.com/path', 'app.example.com'];
    const f = lintConfig(c, { production: true });
    expect(keysOf(f)).toEqual(['warn server.cors_allowed_origins']);
    expect(f[0]!.message).toBe(
      'server.cors_allowed_origins has 2 entries that never match a browser origin ("https://app.example.com/path", "app.example.com")',
    );
  });

  it('warns about an explicit auth.enabled: false beside a user key (the key would otherwise switch auth on)', () => {
    const c = hardened();
    c.auth.enabled = false;
    const f = lintConfig(c, { production: false });
    expect(f[0]).toEqual({
      level: 'warn',
      key: 'auth.enabled',
      message:
        'auth.enabled is false although auth.api_key is set: the key is ignored and anyone who can reach the ' +
        'API can create sandboxes and run commands',
      fix: 'remove auth.enabled: false (a configured key turns auth on), or remove the key',
    });
    expect(keysOf(lintConfig(c, { production: true }))).toEqual([
      'fail auth.enabled',
      'fail server.ui',
      'fail server.mcp',
      'fail server.e2b',
    ]);
    expect(JSON.stringify(f)).not.toContain(STRONG);
  });

  it('describes the dev-box guard with the listed origins, allowed hosts and preview domain', () => {
    const c = defaultConfig();
    c.server.cors_allowed_origins = ['*', 'null', 'https://app.example.com', 'garbage'];
    c.server.allowed_hosts = ['sbx.lan', 'box.example'];
    c.server.preview_domain = 'preview.test.';
    expect(describeGuard(c, 'DevBox')).toBe(
      "dev-box guard on: browser origins limited to localhost, 127.0.0.0/8, [::1], the server's own origin, " +
        'https://app.example.com; Host limited to IP addresses, localhost, devbox, sbx.lan, box.example, ' +
        '*.preview.test (more names: server.allowed_hosts)',
    );
  });
});
