/**
 * Shared harness of the reliability suite: `sbx serve` as a real child process (temp HOME, its
 * own config file, SQLite in that home), the proot rootfs, deadlines, and the figures file that
 * scripts/reliability.mjs turns into RELIABILITY.md.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const BIN = join(ROOT, 'bin', 'sbx.js');
export const DOCKER = process.env.SBX_TEST_DOCKER === '1';
export const PROOT = process.env.SBX_TEST_PROOT === '1';
export const TEST_IMAGE = process.env.SBX_TEST_IMAGE ?? 'sbx-test/busybox:latest';
export const skipWhy = (flag: string) => `(skipped unless ${flag}=1)`;

/**
 * Figures file: tests merge their measurements here; `npm run reliability` names a fresh one and
 * renders it. Not under os.tmpdir(): the global setup gives each run a temp dir it then removes.
 */
export const FIGURES = process.env.SBX_RELIABILITY_FIGURES ?? join(ROOT, 'node_modules', '.cache', 'sbx-reliability', 'figures.json');

export function record(section: string, key: string, value: unknown): void {
  let all: Record<string, Record<string, unknown>> = {};
  try {
    all = JSON.parse(readFileSync(FIGURES, 'utf8'));
  } catch {
    all = {};
  }
  all[section] = { ...(all[section] ?? {}), [key]: value };
  mkdirSync(dirname(FIGURES), { recursive: true });
  writeFileSync(FIGURES, JSON.stringify(all, null, 2) + '\n');
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `fn` until it returns a truthy value or the deadline passes (then returns the last value). */
export async function until<T>(fn: () => Promise<T> | T, ms: number, every = 100): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v || Date.now() > end) return v;
    await sleep(every);
  }
}

/** A temp dir removed by the returned function. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), `sbx-rel-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Builds the busybox rootfs for proot (scripts/make-rootfs.sh). */
export function makeRootfs(dir: string): string {
  const rootfs = join(dir, 'rootfs');
  execFileSync('sh', [join(ROOT, 'scripts', 'make-rootfs.sh'), rootfs], { stdio: 'pipe' });
  return rootfs;
}

export interface Served {
  child: ChildProcess;
  pid: number;
  url: string;
  home: string;
  /** Everything serve printed on stdout and stderr so far. */
  log(): string;
  exited: Promise<number | null>;
  alive(): boolean;
  /** SIGTERM, then SIGKILL after a deadline. */
  stop(): Promise<void>;
  kill9(): Promise<void>;
}

export interface ServeOptions {
  /** Config file contents (written to HOME/.sbx/config.yaml; JSON is YAML). */
  config?: Record<string, unknown>;
  /** Extra env of the serve process. */
  env?: Record<string, string>;
}

/**
 * `node bin/sbx.js serve --port 0` with HOME=home (so its SQLite file is home/.sbx/sbx.db and its
 * installation id lives there) and TMPDIR=home/tmp (so proot work dirs are under home). Starting
 * again with the same home is a restart on the same database and installation.
 */
export async function serve(home: string, opts: ServeOptions = {}): Promise<Served> {
  mkdirSync(join(home, '.sbx'), { recursive: true });
  mkdirSync(join(home, 'tmp'), { recursive: true });
  const config = { logging: { format: 'json', level: 'info' }, ...(opts.config ?? {}) };
  writeFileSync(join(home, '.sbx', 'config.yaml'), JSON.stringify(config, null, 2));
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0'], {
    cwd: home,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, TMPDIR: join(home, 'tmp'), ...(opts.env ?? {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
    if (m) {
      const served: Served = {
        child,
        pid: child.pid!,
        url: m[1]!,
        home,
        log: () => out,
        exited,
        alive: () => child.exitCode === null && child.signalCode === null,
        async stop() {
          if (!served.alive()) return;
          child.kill('SIGTERM');
          const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
          await exited;
          clearTimeout(t);
        },
        async kill9() {
          if (!served.alive()) return;
          child.kill('SIGKILL');
          await exited;
        },
      };
      return served;
    }
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sbx serve did not start:\n${out}`);
    }
    await sleep(50);
  }
}

export interface Res {
  status: number;
  text: string;
  json: any;
  headers: Headers;
}

/** One HTTP call with a deadline; JSON in and out. */
export async function api(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<Res> {
  const h: Record<string, string> = { ...headers };
  if (body !== undefined && !h['content-type']) h['content-type'] = 'application/json';
  const res = await fetch(base + path, {
    method,
    headers: h,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, text, json, headers: res.headers };
}

/** VmRSS and VmHWM of a process, in MB, from /proc/<pid>/status. */
export function memoryOf(pid: number): { rss_mb: number; hwm_mb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss_mb: Math.round(kb('VmRSS') / 1024), hwm_mb: Math.round(kb('VmHWM') / 1024) };
}

/** Makes sure dist/ exists (the npm scripts build first; a bare vitest run may not). */
export function ensureBuilt(): void {
  if (!existsSync(join(ROOT, 'dist', 'cli.js'))) execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'pipe' });
}

/** The installation id a serve home's SQLite database holds (read-only open). */
export async function installationOf(home: string): Promise<string> {
  const { default: Database } = await import('better-sqlite3');
  const db = new Database(join(home, '.sbx', 'sbx.db'), { readonly: true, fileMustExist: true });
  try {
    const row = db.prepare(`SELECT value FROM meta WHERE key = 'installation_id'`).get() as { value: string } | undefined;
    return row?.value ?? '';
  } finally {
    db.close();
  }
}

/** Docker containers labelled with an installation id: id, name, state and the sandbox label. */
export async function dockerContainers(installationId: string): Promise<Array<{ id: string; sandbox: string; state: string }>> {
  const { default: Docker } = await import('dockerode');
  const { LABEL_INSTALLATION, LABEL_SANDBOX } = await import('../../src/adapters/providers/docker/index.js');
  const docker = new Docker({ socketPath: process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock' });
  const list = await docker.listContainers({ all: true, filters: { label: [`${LABEL_INSTALLATION}=${installationId}`] } });
  return list.map((c) => ({ id: c.Id, sandbox: c.Labels[LABEL_SANDBOX] ?? '', state: c.State }));
}

/** Force-removes every container of an installation (teardown). */
export async function removeDockerInstallation(installationId: string): Promise<void> {
  if (!installationId) return;
  const { default: Docker } = await import('dockerode');
  const docker = new Docker({ socketPath: process.env.SBX_TEST_DOCKER_SOCKET ?? '/var/run/docker.sock' });
  for (const c of await dockerContainers(installationId))
    await docker
      .getContainer(c.id)
      .remove({ force: true, v: true })
      .catch(() => undefined);
}

/** Serve config for one provider: mock under home, proot on a fresh rootfs, docker on the test image. */
export function providerConfig(provider: 'mock' | 'proot' | 'docker', home: string, scratch: string): Record<string, unknown> {
  if (provider === 'mock') return { providers: { default: 'mock', mock: { root_dir: join(home, 'mock') } } };
  if (provider === 'proot') return { providers: { default: 'proot', proot: { rootfs: makeRootfs(scratch) } } };
  return { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE } };
}
