import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { copyFileSync, readFileSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { tempDir } from '../helpers/tmp.js';
import { ensureBuilt, ROOT } from './build.js';

const enabled = process.env.SBX_TEST_PACK === '1';
const run = promisify(execFile);

/**
 * The published artifact works: `npm pack`, then in an empty directory `npx ./sbx-cli-*.tgz` one-shot
 * and an `npm install` of the tarball, whose `sbx` runs and whose library entry imports. Dependencies
 * come from the npm cache first, then the registry. The install warns of no engine mismatch, and every
 * installed package accepts the oldest Node our `engines` accepts (scripts/check-engines.mjs).
 */
describe.skipIf(!enabled)('npm pack → npx / install → sbx (set SBX_TEST_PACK=1 to run; needs the npm registry or a warm cache)', () => {
  let tgz: string;
  let app: string;
  let server: TestServer;
  let installLog = '';
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 300_000 });

  afterAll(async () => {
    await server?.close();
  });

  beforeAll(async () => {
    server = await startTestServer();
    ensureBuilt();
    const packDir = tempDir('sbx-pack-');
    // dist/ is built above; skip `prepare` so packing does not rebuild.
    npm(['pack', '--ignore-scripts', '--pack-destination', packDir], ROOT);
    tgz = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz'))!);
    app = tempDir('sbx-pack-app-');
    npm(['init', '-y'], app);
    // Native modules are not needed for the client path; --ignore-scripts keeps this fast.
    const install = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--ignore-scripts', tgz], {
      cwd: app,
      encoding: 'utf8',
      timeout: 300_000,
    });
    installLog = `${install.stdout}${install.stderr}`;
    if (install.status !== 0) throw new Error(`npm install of the tarball failed:\n${installLog}`);
  }, 600_000);

  it('the tarball holds bin, dist (with the agent), completions, the man page and the rootfs scripts, and no sources or tests', () => {
    const list = execFileSync('tar', ['-tzf', tgz], { encoding: 'utf8' }).split('\n');
    for (const f of [
      'package/bin/sbx.js',
      'package/dist/cli.js',
      'package/dist/index.js',
      'package/completions/sbx.bash',
      'package/man/sbx.1',
      // The prebuilt agent (docker mode and the firecracker guest mode) and the scripts that put it in a root drive.
      `package/dist/agent/sbx-agent-linux-${process.arch}`,
      'package/scripts/make-rootfs.sh',
      'package/scripts/make-firecracker-rootfs.sh',
    ])
      expect(list).toContain(f);
    expect(list.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/'))).toBe(false);
    // No source maps: they would point at src/, which is not shipped.
    expect(list.filter((f) => f.endsWith('.map'))).toEqual([]);
    const cli = execFileSync('tar', ['-xzOf', tgz, 'package/dist/cli.js'], { encoding: 'utf8' });
    expect(cli).not.toContain('sourceMappingURL');
  });

  it("a consumer's install accepts the oldest Node that engines allows, with no EBADENGINE warning", () => {
    // Our `overrides` and lockfile do not apply to a consumer; the dependency versions alone must hold.
    expect(installLog).not.toContain('EBADENGINE');
    const check = spawnSync(process.execPath, [join(ROOT, 'scripts', 'check-engines.mjs'), app], { encoding: 'utf8' });
    expect(check.stderr).toBe('');
    const floor = /^>=(\d+\.\d+\.\d+)$/.exec(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).engines.node)![1];
    const m = /^check-engines: (\d+) packages checked against Node (\S+): all accept it\n$/.exec(check.stdout);
    expect(m?.[2]).toBe(floor);
    expect(Number(m?.[1])).toBeGreaterThan(50);
    expect(check.status).toBe(0);
  });

  it('the installed sbx runs', () => {
    const out = execFileSync(join(app, 'node_modules', '.bin', 'sbx'), ['--version'], { encoding: 'utf8' });
    expect(out.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const help = execFileSync(join(app, 'node_modules', '.bin', 'sbx'), ['exec', '--help'], { encoding: 'utf8' });
    expect(help).toContain('Usage: sbx exec');
  });

  it('npx runs the tarball one-shot in an empty directory', async () => {
    const empty = tempDir('sbx-npx-');
    copyFileSync(tgz, join(empty, basename(tgz)));
    // Asynchronous: the test server answering `ls` lives in this process.
    const npx = async (args: string[]) =>
      (
        await run('npx', ['--yes', '--prefer-offline', '--ignore-scripts', `./${basename(tgz)}`, ...args], {
          cwd: empty,
          encoding: 'utf8',
          timeout: 300_000,
        })
      ).stdout;
    expect((await npx(['--version'])).trim()).toMatch(/^\d+\.\d+\.\d+$/);
    // Past the shim's own --version: the built CLI, commander and the command tree load from the install.
    expect(await npx(['exec', '--help'])).toContain('Usage: sbx exec');
    // And a real request: the HTTP client (undici) loads from the tarball's dependencies.
    expect(JSON.parse(await npx(['--url', server.url, 'ls', '--json']))).toEqual([]);
  }, 300_000);

  it('the library entry exports Client and SbxError', () => {
    const out = execFileSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('sbx-cli'); console.log(typeof m.Client, typeof m.SbxError, new m.Client({ " +
          "url: 'http://127.0.0.1:1' }).url)",
      ],
      {
        cwd: app,
        encoding: 'utf8',
      },
    );
    expect(out.trim()).toBe('function function http://127.0.0.1:1');
  });
});
