import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { ConfigError, durationMs, loadConfig, type SbxConfig } from '../../src/config/index.js';
import { dirs, problemsOf, useConfigDirs, write } from './config-fixture.js';

useConfigDirs();
let root = '';
let home = '';
let cwd = '';
beforeEach(() => {
  ({ root, home, cwd } = dirs);
});

describe('loadConfig defaults', () => {
  it('returns the documented defaults when nothing is configured', async () => {
    const { config, sources } = await loadConfig({ cwd, home, env: {} });
    expect(sources).toEqual(['defaults']);
    const expected: SbxConfig = {
      server: {
        host: '127.0.0.1',
        port: 7423,
        preview_domain: '',
        preview_auth: false,
        preview_addr: '',
        cors_allowed_origins: ['*'],
        allowed_hosts: [],
        body_limit_mb: 64,
        max_inflight_mb: 256,
        local_worker: true,
        replica_id: '',
        reaper_interval: '10s',
        leader_ttl: '15s',
        advertise_url: '',
        reconcile_interval: '30s',
        ui: true,
        mcp: true,
        e2b: true,
      },
      defaults: {
        ttl: '30m',
        image: 'debian:bookworm-slim',
        memory_mb: 512,
        vcpus: 1,
        max_ttl: '24h',
        default_exec_timeout: '0s',
        max_exec_timeout: '10m',
        max_sandboxes: 0,
        max_sandboxes_per_owner: 0,
        spawn_overflow: 'reject',
        spawn_queue_timeout: '30s',
        max_spawn_queue: 100,
        network: '',
        egress: { allow: [], deny: [] },
        warm: 0,
        warm_destroy_on_shutdown: false,
        auto_pause: '0s',
        paused_ttl: '24h',
        max_file_mb: 64,
        max_exec_output_mb: 16,
      },
      auth: {
        enabled: false,
        admin_fallback_enabled: true,
        enforce_ownership: false,
        admin_audit_retention: '720h',
        worker_tokens: {},
        worker_signing_keys: [],
        worker_revoked_token_ids: [],
      },
      rate_limit: { enabled: false, requests_per_minute: 120, burst: 60, key_by: 'owner', bucket_ttl: '15m', cleanup_interval: '1m' },
      providers: {
        default: 'auto',
        docker: {
          socket_path: '',
          host: '',
          runtime: 'runc',
          network_mode: 'bridge',
          egress_port: 3128,
          egress_ca_file: '',
          pids_limit: 256,
          added_caps: [],
          seccomp_profile: '',
          read_only_rootfs: false,
          user: '',
          agent: 'auto',
        },
        proot: { binary: 'proot', rootfs: '', allow_unisolated: false },
        mock: { root_dir: '', enabled: false },
        hosted: {},
        firecracker: { binary: 'firecracker', kernel_path: '', rootfs_path: '', data_dir: '' },
        custom_http: { timeout: '30s' },
      },
      pool: { enabled: false, max_vms: 0, max_users_per_vm: 0 },
      worker: { heartbeat_interval: '30s', state_path: '', rpc_tls: { enabled: false, insecure_skip_verify: false } },
      database: { driver: 'sqlite', path: join(home, '.sbx', 'sbx.db') },
      logging: { level: 'info', format: 'auto' },
    };
    expect(config).toEqual(expected);
  });

  it('gives each load its own copy of the defaults', async () => {
    const a = await loadConfig({ cwd, home, env: {} });
    a.config.server.cors_allowed_origins.push('https://x.example');
    const b = await loadConfig({ cwd, home, env: {} });
    expect(b.config.server.cors_allowed_origins).toEqual(['*']);
  });
});

describe('loadConfig sources and precedence', () => {
  it('layers defaults < home < cwd < env < overrides', async () => {
    const homeFile = write(
      join(home, '.sbx', 'config.yaml'),
      'server:\n  port: 1001\n  preview_domain: home.example\ndefaults:\n  ttl: 1h\n  memory_mb: 1024\n  ' +
        'vcpus: 2\nlogging:\n  level: debug\n',
    );
    const cwdFile = write(join(cwd, 'sbx.yaml'), 'server:\n  port: 1002\ndefaults:\n  ttl: 2h\n  memory_mb: 2048\n');
    const { config, sources } = await loadConfig({
      cwd,
      home,
      env: { SVC_SERVER_PORT: '1003', SVC_DEFAULTS_TTL: '3h', PATH: '/usr/bin' },
      overrides: { server: { port: 1004 } },
    });
    expect(config.server.port).toBe(1004); // all four set it
    expect(config.defaults.ttl).toBe('3h'); // home, cwd, env
    expect(config.defaults.memory_mb).toBe(2048); // home, cwd
    expect(config.defaults.vcpus).toBe(2); // home only
    expect(config.server.preview_domain).toBe('home.example');
    expect(config.logging.level).toBe('debug');
    expect(config.server.host).toBe('127.0.0.1'); // default
    expect(sources).toEqual(['defaults', homeFile, cwdFile, 'env (SVC_DEFAULTS_TTL, SVC_SERVER_PORT)', 'overrides']);
  });

  it('looks for the working-directory file in cwd only, never in parent directories', async () => {
    write(join(root, 'work', 'sbx.yaml'), 'server:\n  port: 9999\n');
    const { config, sources } = await loadConfig({ cwd, home, env: {} });
    expect(config.server.port).toBe(7423);
    expect(sources).toEqual(['defaults']);
  });

  it('reads .sbxrc as YAML and sbx.json as JSON, sbx.yaml first when several exist', async () => {
    const rc = write(join(cwd, '.sbxrc'), 'defaults:\n  image: alpine:3\n');
    let loaded = await loadConfig({ cwd, home, env: {} });
    expect(loaded.config.defaults.image).toBe('alpine:3');
    expect(loaded.sources).toEqual(['defaults', rc]);

    const json = write(join(cwd, 'sbx.json'), JSON.stringify({ defaults: { image: 'busybox:1' } }));
    loaded = await loadConfig({ cwd, home, env: {} });
    expect(loaded.config.defaults.image).toBe('busybox:1');
    expect(loaded.sources).toEqual(['defaults', json]);

    const yaml = write(join(cwd, 'sbx.yaml'), 'defaults:\n  image: ubuntu:24.04\n');
    loaded = await loadConfig({ cwd, home, env: {} });
    expect(loaded.config.defaults.image).toBe('ubuntu:24.04');
    expect(loaded.sources).toEqual(['defaults', yaml]);
  });

  it('reads the home file as config.json when there is no config.yaml', async () => {
    const file = write(join(home, '.sbx', 'config.json'), JSON.stringify({ rate_limit: { burst: 7 } }));
    const { config, sources } = await loadConfig({ cwd, home, env: {} });
    expect(config.rate_limit.burst).toBe(7);
    expect(sources).toEqual(['defaults', file]);
  });

  it('treats an empty config file as setting nothing', async () => {
    const file = write(join(cwd, 'sbx.yaml'), '\n');
    const { config, sources } = await loadConfig({ cwd, home, env: {} });
    expect(config.server.port).toBe(7423);
    expect(sources).toEqual(['defaults', file]);
  });

  it('an explicit file replaces both the home and the working-directory file', async () => {
    write(join(home, '.sbx', 'config.yaml'), 'server:\n  port: 1001\nlogging:\n  level: debug\n');
    write(join(cwd, 'sbx.yaml'), 'server:\n  port: 1002\n');
    const explicit = write(join(root, 'explicit.yml'), 'server:\n  host: 0.0.0.0\n');
    const { config, sources } = await loadConfig({ cwd, home, env: { SVC_SERVER_PORT: '1003' }, file: explicit });
    expect(config.server.host).toBe('0.0.0.0');
    expect(config.server.port).toBe(1003); // env still applies over the explicit file
    expect(config.logging.level).toBe('info'); // home file not read
    expect(sources).toEqual(['defaults', explicit, 'env (SVC_SERVER_PORT)']);
  });

  it('SBX_CONFIG names the file, relative to cwd; --config wins over it', async () => {
    write(join(cwd, 'sbx.yaml'), 'server:\n  port: 1002\n');
    const viaEnv = write(join(cwd, 'alt.yaml'), 'server:\n  port: 2001\n');
    const viaFlag = write(join(root, 'flag.json'), '{"server": {"port": 2002}}');
    let loaded = await loadConfig({ cwd, home, env: { SBX_CONFIG: 'alt.yaml' } });
    expect(loaded.config.server.port).toBe(2001);
    expect(loaded.sources).toEqual(['defaults', viaEnv]);
    loaded = await loadConfig({ cwd, home, env: { SBX_CONFIG: 'alt.yaml' }, file: viaFlag });
    expect(loaded.config.server.port).toBe(2002);
    expect(loaded.sources).toEqual(['defaults', viaFlag]);
  });

  it('a missing explicit file is an error naming the path and how it was named', async () => {
    const missing = join(root, 'nope.yaml');
    expect(await problemsOf(loadConfig({ cwd, home, env: {}, file: missing }))).toEqual([`${missing}: file not found (from --config)`]);
    expect(await problemsOf(loadConfig({ cwd, home, env: { SBX_CONFIG: missing } }))).toEqual([
      `${missing}: file not found (from SBX_CONFIG)`,
    ]);
  });

  it('reports a parse error by position without quoting the file', async () => {
    const file = write(join(cwd, 'sbx.yaml'), 'auth:\n  api_key: hunter2-super-secret\n  api_key: again\n');
    const problems = await problemsOf(loadConfig({ cwd, home, env: {} }));
    expect(problems).toEqual([`${file}: invalid YAML: Map keys must be unique at line 3, column 3 (from working directory)`]);
    expect(problems.join('\n')).not.toContain('hunter2');

    const json = write(join(root, 'bad.json'), '{\n  "auth": {"api_key": "hunter2-secret",}\n}');
    const jsonProblems = await problemsOf(loadConfig({ cwd, home, env: {}, file: json }));
    expect(jsonProblems).toHaveLength(1);
    expect(jsonProblems[0]).toMatch(
      new RegExp(`^${json.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: invalid JSON at line 2, column \\d+ \\(from --config\\)$`),
    );
    expect(jsonProblems[0]).not.toContain('hunter2');
  });

  it('expands ~ against the given home and resolves relative paths against cwd', async () => {
    write(
      join(cwd, 'sbx.yaml'),
      'database:\n  path: ~/data/x.db\nproviders:\n  proot:\n    rootfs: rootfs\n  mock:\n    root_dir: /abs/mock\n',
    );
    const { config } = await loadConfig({ cwd, home, env: {} });
    expect(config.database.path).toBe(join(home, 'data', 'x.db'));
    expect(config.providers.proot.rootfs).toBe(join(cwd, 'rootfs'));
    expect(config.providers.mock.root_dir).toBe('/abs/mock');
    const mem = await loadConfig({ cwd, home, env: {}, overrides: { database: { path: ':memory:' } } });
    expect(mem.config.database.path).toBe(':memory:');
  });
});

describe('validation reports every problem at once', () => {
  it('lists bad durations, enums, counts, ports, types and unknown keys with their sources', async () => {
    const file = write(
      join(cwd, 'sbx.yaml'),
      [
        'server:',
        '  port: 70000',
        '  prot: 1',
        '  cors_allowed_origins: "*"',
        'defaults:',
        '  ttl: forever',
        '  max_ttl: -1h',
        '  vcpus: 1.5',
        '  max_sandboxes: -1',
        '  spawn_overflow: drop',
        'rate_limit:',
        '  key_by: user',
        '  enabled: "yes"',
        'logging:',
        '  format: xml',
        'api_key: nope',
        'zzzzzz: 1',
        '',
      ].join('\n'),
    );
    const home1 = write(join(home, '.sbx', 'config.yaml'), 'server:\n  port: 1.5\n');
    const err = await loadConfig({
      cwd,
      home,
      env: { SVC_DEFAULTS_MAX_EXEC_TIMEOUT: '10 minutes' },
      overrides: { pool: { max_vms: -3 } },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).toEqual([
      `server.port: expected an integer, got 1.5 (from ${home1})`,
      `server.port: must be between 0 and 65535, got 70000 (from ${file})`,
      `server.prot: unknown key; did you mean server.port? (from ${file})`,
      `server.cors_allowed_origins: expected a list of strings, got "*" (from ${file})`,
      `defaults.ttl: invalid duration "forever" (use forms like 30s, 5m, 1h30m) (from ${file})`,
      `defaults.max_ttl: must not be negative, got "-1h" (from ${file})`,
      `defaults.vcpus: expected an integer, got 1.5 (from ${file})`,
      `defaults.max_sandboxes: must not be negative, got -1 (from ${file})`,
      `defaults.spawn_overflow: must be one of reject, queue; got "drop" (from ${file})`,
      `rate_limit.key_by: must be one of owner, api_key, ip; got "user" (from ${file})`,
      `rate_limit.enabled: expected true or false, got "yes" (from ${file})`,
      `logging.format: must be one of auto, json, pretty; got "xml" (from ${file})`,
      `api_key: unknown key; did you mean auth.api_key or providers.hosted.api_key or providers.custom_http.api_key? (from ${file})`,
      `zzzzzz: unknown key (from ${file})`,
      'defaults.max_exec_timeout: invalid duration "10 minutes" (use forms like 30s, 5m, 1h30m) (from SVC_DEFAULTS_MAX_EXEC_TIMEOUT)',
      'pool.max_vms: must not be negative, got -3 (from overrides)',
    ]);
    expect((err as ConfigError).message).toBe(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  });

  it('rejects a group given as a scalar and a non-mapping file', async () => {
    const file = write(join(cwd, 'sbx.yaml'), 'server: 8080\n');
    expect(await problemsOf(loadConfig({ cwd, home, env: {} }))).toEqual([
      `server: expected a mapping of keys, got a number (from ${file})`,
    ]);
    const list = write(join(root, 'list.yaml'), '- a\n- b\n');
    expect(await problemsOf(loadConfig({ cwd, home, env: {}, file: list }))).toEqual([
      `(top level): expected a mapping of keys, got a list (from ${list})`,
    ]);
  });

  it('requires an API key when auth is enabled and a DSN for postgres', async () => {
    const file = write(join(cwd, 'sbx.yaml'), 'auth:\n  enabled: true\n');
    expect(await problemsOf(loadConfig({ cwd, home, env: { SVC_DATABASE_DRIVER: 'postgres' } }))).toEqual([
      `auth.enabled: auth is enabled but no auth.api_key or auth.api_key_file is set (from ${file})`,
      'database.driver: postgres needs database.dsn or database.dsn_file (from SVC_DATABASE_DRIVER)',
    ]);
  });

  it('accepts port 0 and the silent log level (used by tests)', async () => {
    const { config } = await loadConfig({ cwd, home, env: {}, overrides: { server: { port: 0 }, logging: { level: 'silent' } } });
    expect(config.server.port).toBe(0);
    expect(config.logging.level).toBe('silent');
  });
});

describe('unknown-key suggestions', () => {
  it('suggests a close sibling, the same key elsewhere, or nothing', async () => {
    const file = write(
      join(cwd, 'sbx.yaml'),
      'rate_limit:\n  burts: 5\n  requests_per_minut: 5\nauth:\n  apikey: x\nworker:\n  rpc_tls:\n    ' +
        'insecure_skip_verfy: true\nruntime: runc\ncolor: blue\n',
    );
    expect(await problemsOf(loadConfig({ cwd, home, env: {} }))).toEqual([
      `rate_limit.burts: unknown key; did you mean rate_limit.burst? (from ${file})`,
      `rate_limit.requests_per_minut: unknown key; did you mean rate_limit.requests_per_minute? (from ${file})`,
      `auth.apikey: unknown key; did you mean auth.api_key? (from ${file})`,
      `worker.rpc_tls.insecure_skip_verfy: unknown key; did you mean worker.rpc_tls.insecure_skip_verify? (from ${file})`,
      `runtime: unknown key; did you mean providers.docker.runtime? (from ${file})`,
      `color: unknown key (from ${file})`,
    ]);
  });

  it('checks overrides against the schema too', async () => {
    const overrides = { server: { hots: 'x' } } as never;
    expect(await problemsOf(loadConfig({ cwd, home, env: {}, overrides }))).toEqual([
      'server.hots: unknown key; did you mean server.host? (from overrides)',
    ]);
  });
});

describe('durationMs', () => {
  it('converts config durations to milliseconds and rejects malformed ones', () => {
    expect(durationMs('30m')).toBe(1_800_000);
    expect(durationMs('1h30m')).toBe(5_400_000);
    expect(durationMs('0s')).toBe(0);
    expect(() => durationMs('soon')).toThrow('invalid duration "soon"');
  });
});
