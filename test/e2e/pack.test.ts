import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from './build.js';

const enabled = process.env.SBX_TEST_PACK === '1';

/**
 * The published artifact works: `npm pack`, then in an empty directory `npx ./sbx-cli-*.tgz` one-shot
 * and an `npm install` of the tarball, whose `sbx` runs and whose library entry imports. Dependencies
 * come from the npm cache first, then the registry.
 */
describe.skipIf(!enabled)('npm pack → npx / install → sbx (set SBX_TEST_PACK=1 to run; needs the npm registry or a warm cache)', () => {
  let tgz: string;
  let app: string;
  const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });

  beforeAll(() => {
    ensureBuilt();
    const packDir = mkdtempSync(join(tmpdir(), 'sbx-pack-'));
    // dist/ is built above; skip `prepare` so packing does not rebuild.
    npm(['pack', '--ignore-scripts', '--pack-destination', packDir], ROOT);
    tgz = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz'))!);
    app = mkdtempSync(join(tmpdir(), 'sbx-pack-app-'));
    npm(['init', '-y'], app);
    // Native modules are not needed for the client path; --ignore-scripts keeps this fast.
    npm(['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tgz], app);
  }, 600_000);

  it('the tarball holds bin, dist, completions and the man page, and no sources or tests', () => {
    const list = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n');
    for (const f of ['package/bin/sbx.js', 'package/dist/cli.js', 'package/dist/index.js', 'package/completions/sbx.bash', 'package/man/sbx.1']) expect(list).toContain(f);
    expect(list.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);
  });

  it('the installed sbx runs', () => {
    const out = execFileSync(join(app, 'node_modules', '.bin', 'sbx'), ['--version'], { encoding: 'utf8' });
    expect(out.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const help = execFileSync(join(app, 'node_modules', '.bin', 'sbx'), ['exec', '--help'], { encoding: 'utf8' });
    expect(help).toContain('Usage: sbx exec');
  });

  it('npx runs the tarball one-shot in an empty directory', () => {
    const empty = mkdtempSync(join(tmpdir(), 'sbx-npx-'));
    copyFileSync(tgz, join(empty, basename(tgz)));
    const out = execFileSync('npx', ['--yes', '--prefer-offline', '--ignore-scripts', `./${basename(tgz)}`, '--version'], {
      cwd: empty,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 300_000,
    });
    expect(out.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  }, 300_000);

  it('the library entry exports Client and SbxError', () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', "const m = await import('sbx-cli'); console.log(typeof m.Client, typeof m.SbxError, new m.Client({ url: 'http://127.0.0.1:1' }).url)"], {
      cwd: app,
      encoding: 'utf8',
    });
    expect(out.trim()).toBe('function function http://127.0.0.1:1');
  });
});
