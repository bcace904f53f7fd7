/**
 * The local checks of `sbx doctor`: the server config, the Docker endpoint and default image, proot,
 * the store path, and what is served while auth is off.
 */
import { constants, existsSync, statSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import type { CliContext } from '../context.js';
import { engineRuntimes, imagePresent, localImages, pingEngine, type DockerEndpoint } from './docker-local.js';

export type Status = 'ok' | 'warn' | 'fail' | 'skip';

export interface Check {
  title: string;
  fix: string;
  /** The fix for a failure that is not the one `fix` is about (e.g. a 429 on a key check). */
  fixFor?: (err: unknown) => string | undefined;
  check: () => Promise<{ status: Status; detail: string; fix?: string }>;
}

// Config is loaded with an import() inside the command (DESIGN.md §2: the CLI start path stays light
// and transports/cli does not import config statically); its type flows from that import.
const configModule = () => import('../../../config/index.js');
type LoadedConfig = Awaited<ReturnType<Awaited<ReturnType<typeof configModule>>['loadConfig']>>['config'];
type Endpoint = DockerEndpoint;

/** First executable named `bin` (a path, or looked up on PATH). */
export function findExecutable(bin: string, pathEnv: string | undefined): string | undefined {
  const candidates =
    isAbsolute(bin) || bin.includes('/')
      ? [bin]
      : (pathEnv ?? '')
          .split(delimiter)
          .filter(Boolean)
          .map((d) => join(d, bin));
  return candidates.find((p) => {
    try {
      return statSync(p).isFile() && (statSync(p).mode & 0o111) !== 0;
    } catch {
      return false;
    }
  });
}

/** The nearest existing directory at or above `path`. */
function existingAncestor(path: string): string {
  let p = path;
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return p;
}

const errText = (err: unknown) => (err as NodeJS.ErrnoException).code ?? (err as Error).message;

/**
 * The catalogue's kinds beyond docker and proot that this config runs (mock, custom-http, …): each
 * is built by the catalogue's factory and asked for its health (bounded), as `serve` would.
 */
async function otherProviders(config: LoadedConfig): Promise<{ status: Status; detail: string; fix?: string }> {
  const { PROVIDER_CATALOGUE, probeEntry, wantedProviders } = await import('../../../compose/doctor.js');
  const { parseDuration } = await import('../../../core/duration.js');
  const { tmpdir } = await import('node:os');
  let want: ReturnType<typeof wantedProviders>;
  try {
    want = wantedProviders(config.providers);
  } catch (err) {
    return { status: 'fail', detail: (err as Error).message };
  }
  const rows: string[] = [];
  let status: Status = 'ok';
  for (const entry of PROVIDER_CATALOGUE) {
    if (!entry.create || want[entry.name] !== 'required') continue;
    if (entry.notice) {
      // Nothing to reach (mock runs here): say what it means instead of building it.
      if (status === 'ok') status = 'warn';
      rows.push(`${entry.name} enabled: ${entry.notice}`);
      continue;
    }
    const ctx = {
      installationId: 'doctor',
      durationMs: (t: string) => parseDuration(t),
      scratchDir: (n: string) => join(tmpdir(), `${n}-doctor`),
    };
    const h = await probeEntry(entry, config.providers, ctx, AbortSignal.timeout(10_000)).catch((err: unknown) => ({
      healthy: false,
      latency_ms: 0,
      error: (err as Error).message,
    }));
    if (!h.healthy) status = 'fail';
    rows.push(h.healthy ? `${entry.name} healthy (${h.latency_ms} ms)` : `${entry.name} unhealthy: ${h.error ?? 'no answer'}`);
  }
  if (rows.length === 0) return { status: 'skip', detail: 'none enabled besides docker and proot' };
  return { status, detail: rows.join('; ') };
}

/**
 * What the local checks share, each found once and only when a check asks: the config as the
 * server would load it, the Docker engine as the server would find it, and what the provider
 * catalogue makes of them.
 */
function localProbes(ctx: CliContext, configFile: string | undefined) {
  let loaded: LoadedConfig | undefined;
  let loadError: string | undefined;
  const load = async () => {
    if (loaded || loadError) return loaded;
    try {
      const { loadConfig } = await configModule();
      loaded = (await loadConfig({ file: configFile, env: ctx.env, cwd: ctx.cwd, home: ctx.home })).config;
    } catch (err) {
      const problems = (err as { problems?: string[] }).problems;
      loadError = problems ? problems.join('; ') : (err as Error).message;
    }
    return loaded;
  };
  // The engine as the server would find it (DESIGN.md: explicit config, DOCKER_HOST, docker context, default socket).
  let engine: { endpoint?: Endpoint; error?: string; answer?: string; pingError?: string } | undefined;
  const docker = async () => {
    if (engine) return engine;
    const config = await load();
    try {
      const { resolveDockerEndpoint } = await import('../../../config/docker-endpoint.js');
      const endpoint = resolveDockerEndpoint({
        socketPath: config?.providers.docker.socket_path,
        host: config?.providers.docker.host,
        env: ctx.env,
        home: ctx.home,
      });
      engine = { endpoint };
      try {
        engine.answer = await pingEngine(endpoint);
      } catch (err) {
        engine.pingError = errText(err);
      }
    } catch (err) {
      engine = { error: (err as Error).message };
    }
    return engine;
  };
  /** The config and an answering engine, or the skip row of a check that needs both. */
  const configAndEngine = async (): Promise<
    { config: LoadedConfig; endpoint: Endpoint } | { skip: { status: Status; detail: string } }
  > => {
    const config = await load();
    if (!config) return { skip: { status: 'skip', detail: 'configuration does not load' } };
    const e = await docker();
    if (!e.endpoint || e.pingError !== undefined) return { skip: { status: 'skip', detail: 'no Docker engine answers' } };
    return { config, endpoint: e.endpoint };
  };
  /** What the provider catalogue says the server will do with a provider (the same table serve reads). */
  const wants = async (name: 'docker' | 'proot') => {
    const config = await load();
    if (!config) return 'auto';
    const { wantedProviders } = await import('../../../compose/doctor.js');
    try {
      return wantedProviders(config.providers)[name];
    } catch {
      return 'required';
    }
  };
  const dockerIsDefault = async () => (await wants('docker')) === 'required';
  return { load, loadError: () => loadError, docker, configAndEngine, wants, dockerIsDefault };
}

type Probes = ReturnType<typeof localProbes>;

/** The `configuration` check. */
function configurationCheck(p: Probes): Check {
  return {
    title: 'configuration',
    fix: 'run `sbx config lint` for every finding and its fix',
    async check() {
      const config = await p.load();
      if (!config)
        return { status: 'fail', detail: `does not load: ${p.loadError()}`, fix: 'fix the keys named above (see `sbx config lint`)' };
      const { lintConfig } = await import('../../../config/index.js');
      const findings = lintConfig(config, { production: false });
      const fails = findings.filter((f) => f.level === 'fail');
      if (findings.length === 0) return { status: 'ok', detail: 'loads; no lint findings' };
      const keys = findings.map((f) => f.key).join(', ');
      return {
        status: fails.length > 0 ? 'fail' : 'warn',
        detail: `${fails.length} failure(s), ${findings.length - fails.length} warning(s): ${keys}`,
      };
    },
  };
}

/** The `auth` check. */
function authCheck(p: Probes): Check {
  return {
    title: 'auth',
    fix: 'for anything beyond a dev box set auth.enabled: true with auth.api_key (see `sbx config lint --production`)',
    async check() {
      const config = await p.load();
      if (!config) return { status: 'skip', detail: 'configuration does not load' };
      if (config.auth.enabled) return { status: 'ok', detail: 'on: requests need an API key' };
      const { describeGuard } = await import('../../../config/lint.js');
      return {
        status: 'warn',
        detail: 'off: the API is open to whoever reaches the port (browser origins and Host names limited)',
        fix: `${describeGuard(config)}; for anything beyond a dev box set auth.enabled: true with auth.api_key`,
      };
    },
  };
}

/** The `local Docker engine` check. */
function engineCheck(p: Probes): Check {
  return {
    title: 'local Docker engine',
    fix:
      'start dockerd, or point sbx at it (providers.docker.socket_path or host, DOCKER_HOST, docker ' +
      'context); without Docker, sbx serve falls back to proot or mock',
    async check() {
      const required = await p.dockerIsDefault();
      const e = await p.docker();
      if (!e.endpoint) return { status: required ? 'fail' : 'warn', detail: `no usable endpoint: ${e.error}` };
      if (e.pingError !== undefined) return { status: required ? 'fail' : 'warn', detail: `${e.endpoint.description}: ${e.pingError}` };
      return { status: 'ok', detail: `${e.endpoint.description} answers ${e.answer}` };
    },
  };
}

/** The `docker runtime` check. */
function runtimeCheck(p: Probes): Check {
  return {
    title: 'docker runtime',
    fix:
      'register the runtime with the engine (gVisor: apt-get install runsc, then add it under "runtimes" ' +
      'in /etc/docker/daemon.json), or unset providers.docker.runtime',
    async check() {
      const ready = await p.configAndEngine();
      if ('skip' in ready) return ready.skip;
      const { config, endpoint } = ready;
      let runtimes: string[];
      try {
        runtimes = await engineRuntimes(endpoint);
      } catch (err) {
        return { status: 'warn', detail: `cannot ask the engine for its runtimes (${errText(err)})` };
      }
      const wanted = config.providers.docker.runtime;
      const gvisor = runtimes.includes('runsc') ? 'gVisor (runsc) available' : 'gVisor (runsc) not registered';
      if (!wanted) return { status: 'ok', detail: `engine default; registered: ${runtimes.join(', ') || 'none'}; ${gvisor}` };
      if (!runtimes.includes(wanted))
        return {
          status: 'fail',
          detail: `providers.docker.runtime is ${wanted}, which the engine does not have (registered: ${runtimes.join(', ') || 'none'})`,
        };
      return { status: 'ok', detail: `${wanted}${wanted === 'runsc' ? ' (gVisor)' : ''}; registered: ${runtimes.join(', ')}` };
    },
  };
}

/** The `default image` check. */
function imageCheck(p: Probes): Check {
  return {
    title: 'default image',
    fix: 'let the engine pull it once (registry access), or spawn with --image NAME / set defaults.image to an image the engine has',
    async check() {
      const ready = await p.configAndEngine();
      if ('skip' in ready) return ready.skip;
      const { config, endpoint } = ready;
      const image = config.defaults.image;
      try {
        if (await imagePresent(endpoint, image)) return { status: 'ok', detail: `${image} is present` };
      } catch (err) {
        return { status: 'warn', detail: `${image}: cannot ask the engine (${errText(err)}); pull not verified` };
      }
      const others = await localImages(endpoint, 3).catch(() => []);
      const hint = others.length > 0 ? `images the engine has: ${others.join(', ')}` : 'the engine has no tagged images';
      return {
        status: 'warn',
        detail: `${image} is not present: pull not verified (the first docker spawn pulls it); ${hint}`,
        fix:
          `without registry access spawn with --image NAME or set defaults.image to a local ` +
          `image${others.length > 0 ? ` (e.g. ${others[0]})` : ''}`,
      };
    },
  };
}

/** The `proot and rootfs` check. */
function prootCheck(p: Probes, ctx: CliContext): Check {
  return {
    title: 'proot and rootfs',
    fix: 'install proot (apt-get install proot) and set providers.proot.rootfs to a directory with /bin/sh',
    async check() {
      const config = await p.load();
      const required = (await p.wants('proot')) === 'required';
      const bin = findExecutable(config?.providers.proot.binary || 'proot', ctx.env.PATH);
      const rootfs = config?.providers.proot.rootfs ?? '';
      const hasRootfs = rootfs !== '' && existsSync(join(rootfs, 'bin', 'sh'));
      if (bin && hasRootfs) return { status: 'ok', detail: `${bin}, rootfs ${rootfs}` };
      const missing = [
        bin ? undefined : 'proot binary not found',
        hasRootfs ? undefined : rootfs ? `no /bin/sh under ${rootfs}` : 'providers.proot.rootfs not set',
      ]
        .filter(Boolean)
        .join('; ');
      return { status: required ? 'fail' : 'warn', detail: missing };
    },
  };
}

/** The `other providers` check. */
function otherProvidersCheck(p: Probes): Check {
  return {
    title: 'other providers',
    fix: 'see the provider named above; `sbx config lint` shows the keys',
    async check() {
      const config = await p.load();
      if (!config) return { status: 'skip', detail: 'configuration does not load' };
      return otherProviders(config);
    },
  };
}

/** The `E2B API` check. */
function e2bCheck(p: Probes): Check {
  return {
    title: 'E2B API',
    fix:
      "E2B's SDKs send keys shaped e2b_<hex>: set auth.api_key to such a value (e.g. e2b_ followed by 40 " +
      'hex digits), or set server.e2b: false',
    async check() {
      const config = await p.load();
      if (!config) return { status: 'skip', detail: 'configuration does not load' };
      if (!config.server.e2b) return { status: 'skip', detail: 'server.e2b is off' };
      if (!config.auth.enabled) return { status: 'ok', detail: 'served under /e2b; auth is off, so any key the SDK sends passes' };
      // The key itself is never printed: only whether it has the shape the SDKs send.
      if (/^e2b_[0-9a-f]+$/.test(config.auth.api_key ?? ''))
        return { status: 'ok', detail: 'served under /e2b; auth.api_key has the e2b_<hex> shape the SDKs send' };
      return { status: 'warn', detail: "served under /e2b, but auth.api_key is not shaped e2b_<hex>, which E2B's SDKs expect" };
    },
  };
}

/** The `store path writable` check. */
function storePathCheck(p: Probes): Check {
  return {
    title: 'store path writable',
    fix: 'set database.path to a writable location, or fix the directory permissions',
    async check() {
      const config = await p.load();
      if (!config) return { status: 'skip', detail: 'configuration does not load' };
      if (config.database.driver !== 'sqlite') return { status: 'skip', detail: `${config.database.driver} (checked by the server)` };
      const path = config.database.path;
      const target = existsSync(path) ? path : existingAncestor(dirname(path));
      try {
        await access(target, constants.W_OK);
        return { status: 'ok', detail: path };
      } catch {
        return { status: 'fail', detail: `${target} is not writable (database.path ${path})` };
      }
    },
  };
}

export function localChecks(ctx: CliContext, configFile: string | undefined): Check[] {
  const p = localProbes(ctx, configFile);
  return [
    configurationCheck(p),
    authCheck(p),
    engineCheck(p),
    runtimeCheck(p),
    imageCheck(p),
    prootCheck(p, ctx),
    otherProvidersCheck(p),
    e2bCheck(p),
    storePathCheck(p),
  ];
}
