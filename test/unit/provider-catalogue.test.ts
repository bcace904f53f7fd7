/**
 * One provider catalogue (config/provider-catalogue.ts) read by serve, worker and doctor: what each
 * config asks for, and — with proot installed — several providers running side by side.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/defaults.js';
import { PROVIDER_CATALOGUE, wantedProviders } from '../../src/config/provider-catalogue.js';
import type { SbxConfig } from '../../src/config/types.js';
import { startTestServer } from '../helpers/server.js';

interface Over {
  default?: SbxConfig['providers']['default'];
  docker?: Partial<SbxConfig['providers']['docker']>;
  proot?: Partial<SbxConfig['providers']['proot']>;
  mock?: Partial<SbxConfig['providers']['mock']>;
}
const cfg = (p: Over): SbxConfig => {
  const c = defaultConfig();
  Object.assign(c.providers.docker, p.docker ?? {});
  Object.assign(c.providers.proot, p.proot ?? {});
  Object.assign(c.providers.mock, p.mock ?? {});
  if (p.default) c.providers.default = p.default;
  return c;
};

describe('wantedProviders', () => {
  it('auto detects docker and proot, never mock; a named default is required and the others run only on request', () => {
    expect(wantedProviders(cfg({ default: 'auto' }))).toEqual({ docker: 'auto', proot: 'auto', mock: 'off' });
    expect(wantedProviders(cfg({ default: 'mock' }))).toEqual({ docker: 'off', proot: 'off', mock: 'required' });
    expect(wantedProviders(cfg({ default: 'docker', proot: { enabled: true }, mock: { enabled: true } }))).toEqual({ docker: 'required', proot: 'required', mock: 'required' });
    expect(wantedProviders(cfg({ default: 'auto', docker: { enabled: false } }))).toEqual({ docker: 'off', proot: 'auto', mock: 'off' });
    expect(() => wantedProviders(cfg({ default: 'proot', proot: { enabled: false } }))).toThrow('providers.default is "proot" but providers.proot.enabled is false');
    expect(PROVIDER_CATALOGUE.filter((e) => e.autoRank !== null).map((e) => e.name)).toEqual(['docker', 'proot']);
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
      expect(list.map((p) => [p.name, p.default])).toEqual([['mock', true], ['proot', false]]);
      for (const provider of ['mock', 'proot']) {
        const sb = await fetch(`${srv.url}/api/v1/sandboxes`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ provider }) });
        expect(sb.status).toBe(201);
        expect(((await sb.json()) as { provider: string }).provider).toBe(provider);
      }
    } finally {
      await srv.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
