import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/index.js';
import { parseUser } from '../../src/adapters/providers/docker/options.js';
import { dirs, problemsOf, useConfigDirs, write } from './config-fixture.js';

useConfigDirs();

const NUMERIC = 'expected a numeric uid or uid:gid such as 65534 or 1000:1000 (user names cannot be resolved before the container exists)';

describe('providers.docker.user', () => {
  it('takes a numeric uid or uid:gid, from YAML (a bare number too) and from the env', async () => {
    const file = write(join(dirs.cwd, 'sbx.yaml'), 'providers:\n  docker:\n    user: 65534\n');
    expect((await loadConfig({ cwd: dirs.cwd, home: dirs.home, env: {} })).config.providers.docker.user).toBe('65534');
    write(file, "providers:\n  docker:\n    user: '1000:1000'\n");
    expect((await loadConfig({ cwd: dirs.cwd, home: dirs.home, env: {} })).config.providers.docker.user).toBe('1000:1000');
    const env = { SVC_PROVIDERS_DOCKER_USER: ' 0:0 ' };
    expect((await loadConfig({ cwd: dirs.cwd, home: dirs.home, env })).config.providers.docker.user).toBe('0:0');
    // An empty env value is "not set": the file's value stays.
    expect(
      (await loadConfig({ cwd: dirs.cwd, home: dirs.home, env: { SVC_PROVIDERS_DOCKER_USER: '' } })).config.providers.docker.user,
    ).toBe('1000:1000');
  });

  it('refuses user names and malformed ids, listed with every other problem', async () => {
    const file = write(join(dirs.cwd, 'sbx.yaml'), 'server:\n  port: -1\nproviders:\n  docker:\n    user: nobody\n');
    expect(await problemsOf(loadConfig({ cwd: dirs.cwd, home: dirs.home, env: {} }))).toEqual([
      `server.port: must be between 0 and 65535, got -1 (from ${file})`,
      `providers.docker.user: ${NUMERIC}, got "nobody" (from ${file})`,
    ]);
    for (const bad of ['1000:', ':1000', '1000:1000:1', '-1', '4294967295', '1000:4294967295', 'root:root']) {
      const problems = await problemsOf(
        loadConfig({ cwd: dirs.cwd, home: dirs.home, env: {}, file: write(file, `providers:\n  docker:\n    user: '${bad}'\n`) }),
      );
      expect(problems, bad).toEqual([`providers.docker.user: ${NUMERIC}, got ${JSON.stringify(bad)} (from ${file})`]);
    }
    const fromEnv = await problemsOf(loadConfig({ cwd: dirs.root, home: dirs.home, env: { SVC_PROVIDERS_DOCKER_USER: 'www-data' } }));
    expect(fromEnv).toEqual([`providers.docker.user: ${NUMERIC}, got "www-data" (from SVC_PROVIDERS_DOCKER_USER)`]);
  });

  it('the provider option takes the same forms and says what it wants otherwise', () => {
    expect(parseUser(undefined)).toBeUndefined();
    expect(parseUser('')).toBeUndefined();
    expect(parseUser('65534')).toEqual({ spec: '65534', uid: 65534, gid: undefined });
    expect(parseUser('1000:50')).toEqual({ spec: '1000:50', uid: 1000, gid: 50 });
    for (const bad of ['nobody', '1000:', '4294967295', '1:2:3']) {
      expect(() => parseUser(bad), bad).toThrow(
        `docker provider: user must be a numeric uid or uid:gid such as 65534 or 1000:1000, got ${JSON.stringify(bad)}`,
      );
    }
  });
});
