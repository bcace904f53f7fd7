/**
 * One provider catalogue (adapters/providers/catalog.ts) read by serve, worker and doctor: what each
 * config asks for, and — with proot installed — several providers running side by side.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/defaults.js';
import { catalogueEntry, probeEntry, PROVIDER_CATALOGUE, wantedProviders as wantedOf } from '../../src/adapters/providers/catalog.js';
import type { SbxConfig } from '../../src/config/types.js';
import { lintConfig } from '../../src/config/lint.js';
import { startTestServer } from '../helpers/server.js';

interface Over {
  default?: SbxConfig['providers']['default'];
  docker?: Partial<SbxConfig['providers']['docker']>;
  proot?: Partial<SbxConfig['providers']['proot']>;
  mock?: Partial<SbxConfig['providers']['mock']>;
  custom_http?: Partial<SbxConfig['providers']['custom_http']>;
  hosted?: Partial<SbxConfig['providers']['hosted']>;
  firecracker?: Partial<SbxConfig['providers']['firecracker']>;
}
const cfg = (p: Over): SbxConfig => {
  const c = defaultConfig();
  Object.assign(c.providers.docker, p.docker ?? {});
  Object.assign(c.providers.proot, p.proot ?? {});
  Object.assign(c.providers.mock, p.mock ?? {});
  Object.assign(c.providers.custom_http, p.custom_http ?? {});
  Object.assign(c.providers.hosted, p.hosted ?? {});
  Object.assign(c.providers.firecracker, p.firecracker ?? {});
  if (p.default) c.providers.default = p.default;
  return c;
};

const wantedProviders = (c: SbxConfig) => wantedOf(c.providers);
const rest = { custom_http: 'off', hosted: 'off', firecracker: 'off' } as const;

describe('wantedProviders', () => {
  it('auto detects docker and proot, never mock; a named default is required and the others run only on request', () => {
    expect(wantedProviders(cfg({ default: 'auto' }))).toEqual({ docker: 'auto', proot: 'auto', mock: 'off', ...rest });
    expect(wantedProviders(cfg({ default: 'mock' }))).toEqual({ docker: 'off', proot: 'off', mock: 'required', ...rest });
    expect(wantedProviders(cfg({ default: 'docker', proot: { enabled: true }, mock: { enabled: true } }))).toEqual({
      docker: 'required',
      proot: 'required',
      mock: 'required',
      ...rest,
    });
    expect(wantedProviders(cfg({ default: 'auto', docker: { enabled: false } }))).toEqual({
      docker: 'off',
      proot: 'auto',
      mock: 'off',
      ...rest,
    });
    expect(() => wantedProviders(cfg({ default: 'proot', proot: { enabled: false } }))).toThrow(
      'providers.default is "proot" but providers.proot.enabled is false',
    );
    expect(PROVIDER_CATALOGUE.filter((e) => e.autoRank !== null).map((e) => e.name)).toEqual(['docker', 'proot']);
  });

  it('custom-http runs only when enabled or named, never by auto; each kind names its config group', () => {
    expect(wantedProviders(cfg({ default: 'auto', custom_http: { base_url: 'http://x' } })).custom_http).toBe('off');
    expect(wantedProviders(cfg({ default: 'auto', custom_http: { enabled: true } })).custom_http).toBe('required');
    expect(wantedProviders(cfg({ default: 'custom_http' })).custom_http).toBe('required');
    // The other spelling is the same provider (DESIGN §12).
    expect(wantedProviders(cfg({ default: 'custom-http' as never })).custom_http).toBe('required');
    expect(() => wantedProviders(cfg({ default: 'custom_http', custom_http: { enabled: false } }))).toThrow(
      'providers.default is "custom_http" but providers.custom_http.enabled is false',
    );
    expect(PROVIDER_CATALOGUE.map((e) => [e.name, e.group])).toEqual([
      ['docker', 'docker'],
      ['proot', 'proot'],
      ['mock', 'mock'],
      ['custom_http', 'custom_http'],
      ['hosted', 'hosted'],
      ['firecracker', 'firecracker'],
    ]);
  });

  it('hosted needs its key: enabling it without one is a clear error when it is built, never a fake provider', async () => {
    expect(wantedProviders(cfg({ hosted: { enabled: true } })).hosted).toBe('required');
    const ctx = { installationId: 'i', durationMs: () => 1000, scratchDir: (n: string) => n };
    await expect(catalogueEntry('hosted')!.create!(defaultConfig().providers, ctx)).rejects.toThrow('providers.hosted.api_key is not set');
    const built = await catalogueEntry('hosted')!.create!(
      cfg({ hosted: { api_key: 'k'.repeat(20), base_url: 'http://127.0.0.1:1' } }).providers,
      ctx,
    );
    expect(built.name).toBe('hosted');
    expect(JSON.stringify(built.config())).not.toContain('kkkk');
  });

  it('the health probe builds, asks and closes; a refusing factory is unhealthy with its reason', async () => {
    const ctx = { installationId: 'i', durationMs: () => 500, scratchDir: (n: string) => n };
    const signal = AbortSignal.timeout(5_000);
    expect(await probeEntry(catalogueEntry('hosted')!, defaultConfig().providers, ctx, signal)).toMatchObject({
      healthy: false,
      error: expect.stringContaining('api_key is not set'),
    });
    expect(await probeEntry(catalogueEntry('custom_http')!, defaultConfig().providers, ctx, signal)).toMatchObject({
      healthy: false,
      error: expect.stringContaining('base_url is not set'),
    });
    const down = await probeEntry(
      catalogueEntry('custom_http')!,
      cfg({ custom_http: { base_url: 'http://127.0.0.1:1' } }).providers,
      ctx,
      signal,
    );
    expect(down).toMatchObject({ healthy: false, error: expect.stringContaining('cannot reach the backend') });
  });

  it('the custom-http factory needs a base_url and builds a provider whose config hides the key', async () => {
    const ctx = { installationId: 'i', durationMs: () => 1000, scratchDir: (n: string) => n };
    const entry = catalogueEntry('custom_http')!;
    await expect(entry.create!(cfg({}).providers, ctx)).rejects.toThrow('providers.custom_http.base_url is not set');
    const p = await entry.create!(
      cfg({ custom_http: { base_url: 'http://user:pw@127.0.0.1:1/base', api_key: 'secret-key-123' } }).providers,
      ctx,
    );
    try {
      expect(p.name).toBe('custom_http');
      expect(JSON.stringify(p.config())).not.toMatch(/secret-key-123|pw/);
      expect(p.config()).toMatchObject({ base_url: 'http://127.0.0.1:1/base', api_key: 'set' });
    } finally {
      await p.close?.();
    }
  });
});

describe('config lint of custom_http', () => {
  const findings = (c: SbxConfig) => lintConfig(c, { production: true }).filter((f) => f.key.startsWith('providers.custom_http'));
  it('fails without base_url, fails in production without a key, says nothing when it is off', () => {
    expect(findings(cfg({}))).toEqual([]);
    expect(findings(cfg({ custom_http: { enabled: true } }))).toMatchObject([{ level: 'fail', key: 'providers.custom_http.base_url' }]);
    expect(findings(cfg({ default: 'custom_http', custom_http: { base_url: 'http://b' } }))).toMatchObject([
      { level: 'fail', key: 'providers.custom_http.api_key' },
    ]);
    expect(
      lintConfig(cfg({ custom_http: { enabled: true, base_url: 'http://b' } }), { production: false }).find(
        (f) => f.key === 'providers.custom_http.api_key',
      )?.level,
    ).toBe('warn');
    expect(findings(cfg({ custom_http: { enabled: true, base_url: 'http://b', api_key: 'k' } }))).toEqual([]);
  });
});

const proot = process.env.SBX_TEST_PROOT === '1';
describe.skipIf(!proot)('side by side (needs proot: SBX_TEST_PROOT=1)', () => {
  it('mock as the default with proot enabled beside it: both listed, a spawn on each', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sbx-side-'));
    const rootfs = join(dir, 'rootfs');
    execFileSync('sh', [join(import.meta.dirname, '..', '..', 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
    const srv = await startTestServer({ providers: { default: 'mock', proot: { enabled: true, rootfs } } });
    try {
      const list = (await (await fetch(`${srv.url}/api/v1/providers`)).json()) as Array<{ name: string; default: boolean }>;
      expect(list.map((p) => [p.name, p.default])).toEqual([
        ['mock', true],
        ['proot', false],
      ]);
      for (const provider of ['mock', 'proot']) {
        const sb = await fetch(`${srv.url}/api/v1/sandboxes`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ provider }),
        });
        expect(sb.status).toBe(201);
        expect(((await sb.json()) as { provider: string }).provider).toBe(provider);
      }
    } finally {
      await srv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
