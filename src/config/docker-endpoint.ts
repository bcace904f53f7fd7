import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';

import type { DockerEndpoint, DockerTls } from '../shared/docker-endpoint.js';

export type { DockerEndpoint, DockerTls } from '../shared/docker-endpoint.js';

/** An endpoint that cannot be used as given (unsupported scheme, unreadable context or TLS files). */
export class DockerEndpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DockerEndpointError';
  }
}

export const DEFAULT_DOCKER_SOCKET = '/var/run/docker.sock';

export interface ResolveDockerEndpointOptions {
  /** `providers.docker.socket_path` ('' or absent = unset). */
  socketPath?: string;
  /** `providers.docker.host` ('' or absent = unset), written like DOCKER_HOST. */
  host?: string;
  /** Environment to read DOCKER_HOST, DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, DOCKER_CONTEXT, DOCKER_CONFIG from; default process.env. */
  env?: Record<string, string | undefined>;
  /** Home directory for `~/.docker`; default $HOME or the OS home. */
  home?: string;
}

/**
 * The engine endpoint, in the docker CLI's order; the first source present wins and there is no
 * fallback once one is chosen (a DOCKER_HOST pointing nowhere means no engine, never another one):
 * explicit socket_path, explicit host, DOCKER_HOST, the current docker context (DOCKER_CONTEXT,
 * else `currentContext` in `$DOCKER_CONFIG/config.json` or `~/.docker/config.json`), then
 * /var/run/docker.sock. Throws DockerEndpointError for an endpoint that cannot be used.
 */
export function resolveDockerEndpoint(opts: ResolveDockerEndpointOptions): DockerEndpoint {
  const env = opts.env ?? process.env;
  const home = opts.home || env.HOME || homedir();
  const socketPath = opts.socketPath?.trim();
  if (socketPath) {
    const source = 'providers.docker.socket_path';
    const path = socketPath.startsWith('unix://') ? socketPath.slice('unix://'.length) : socketPath;
    if (!isAbsolute(path)) throw new DockerEndpointError(`${source} must be an absolute path, got ${JSON.stringify(socketPath)}`);
    return unix(path, source);
  }
  const host = opts.host?.trim();
  if (host) return fromHost(host, 'providers.docker.host', () => envTls(env, home));
  const dockerHost = env.DOCKER_HOST?.trim();
  if (dockerHost) return fromHost(dockerHost, 'DOCKER_HOST', () => envTls(env, home));
  const fromContext = contextEndpoint(env, home);
  if (fromContext) return fromContext;
  return unix(DEFAULT_DOCKER_SOCKET, 'default');
}

function unix(socketPath: string, source: string): DockerEndpoint {
  return { kind: 'unix', socketPath, source, description: `unix://${socketPath} (${source})` };
}

function tcp(host: string, port: number, tls: DockerTls | null, source: string): DockerEndpoint {
  const shown = host.includes(':') ? `[${host}]` : host;
  const how = tls ? (tls.verify ? ' over TLS' : ' over TLS, server not verified') : '';
  return { kind: 'tcp', host, port, tls, source, description: `tcp://${shown}:${port}${how} (${source})` };
}

/** Parses `unix:///path` or `tcp://host[:port]` (a bare `host:port` is tcp, as for the CLI); TLS is read only for tcp. */
function fromHost(value: string, source: string, tlsOf: () => DockerTls | null): DockerEndpoint {
  if (value.startsWith('unix://')) {
    const path = value.slice('unix://'.length);
    if (!path || !isAbsolute(path))
      throw new DockerEndpointError(`${source}: unix socket address must be unix:///absolute/path, got ${JSON.stringify(value)}`);
    return unix(path, source);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase();
  if (scheme !== undefined && scheme !== 'tcp') {
    throw new DockerEndpointError(
      `${source}: unsupported docker host scheme "${scheme}://" in ${JSON.stringify(value)} (sbx supports ` +
        `unix:// and tcp://; for ssh, forward the engine socket and point ${source} at it)`,
    );
  }
  let url: URL;
  try {
    url = new URL(scheme ? value : `tcp://${value}`);
  } catch {
    throw new DockerEndpointError(
      `${source}: cannot parse docker host ${JSON.stringify(value)} (expected tcp://host:port or unix:///path)`,
    );
  }
  if (!url.hostname || (url.pathname && url.pathname !== '/') || url.username || url.search) {
    throw new DockerEndpointError(`${source}: docker host must be tcp://host[:port], got ${JSON.stringify(value)}`);
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const tls = tlsOf();
  // The CLI's defaults: 2376 with TLS, 2375 without.
  const port = url.port ? Number(url.port) : tls ? 2376 : 2375;
  return tcp(host, port, tls, source);
}

/** TLS from DOCKER_TLS_VERIFY / DOCKER_TLS / DOCKER_CERT_PATH (default ~/.docker), or null. */
function envTls(env: Record<string, string | undefined>, home: string): DockerTls | null {
  const verify = (env.DOCKER_TLS_VERIFY ?? '') !== '';
  if (!verify && (env.DOCKER_TLS ?? '') === '') return null;
  const dir = env.DOCKER_CERT_PATH || configDir(env, home);
  return { ...pemFiles(dir, 'DOCKER_CERT_PATH'), verify };
}

/** ca.pem, cert.pem, key.pem of a directory, each when present; a cert without its key is an error. */
function pemFiles(dir: string, what: string): Omit<DockerTls, 'verify'> {
  const read = (name: string): string | undefined => {
    const file = join(dir, name);
    if (!existsSync(file)) return undefined;
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      throw new DockerEndpointError(`${what}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
    }
  };
  const out = { ca: read('ca.pem'), cert: read('cert.pem'), key: read('key.pem') };
  if ((out.cert === undefined) !== (out.key === undefined)) {
    throw new DockerEndpointError(`${what}: ${dir} has ${out.cert ? 'cert.pem without key.pem' : 'key.pem without cert.pem'}`);
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v !== undefined));
}

function configDir(env: Record<string, string | undefined>, home: string): string {
  return env.DOCKER_CONFIG || join(home, '.docker');
}

/** The current context's docker endpoint, or undefined for the `default` context (or none). */
function contextEndpoint(env: Record<string, string | undefined>, home: string): DockerEndpoint | undefined {
  const dir = configDir(env, home);
  let name = env.DOCKER_CONTEXT?.trim();
  if (!name) {
    const file = join(dir, 'config.json');
    if (!existsSync(file)) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new DockerEndpointError(
        `cannot read the docker CLI config ${file}: ` +
          `${err instanceof SyntaxError ? 'not valid JSON' : ((err as NodeJS.ErrnoException).code ?? (err as Error).message)}`,
      );
    }
    const current = (parsed as { currentContext?: unknown } | null)?.currentContext;
    name = typeof current === 'string' ? current.trim() : '';
  }
  if (!name || name === 'default') return undefined;
  const source = `docker context "${name}"`;
  const sha = createHash('sha256').update(name).digest('hex');
  const metaFile = join(dir, 'contexts', 'meta', sha, 'meta.json');
  let meta: { Endpoints?: { docker?: { Host?: unknown; SkipTLSVerify?: unknown } } };
  try {
    meta = JSON.parse(readFileSync(metaFile, 'utf8')) as typeof meta;
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    const why = e.code === 'ENOENT' ? 'the context does not exist' : err instanceof SyntaxError ? 'not valid JSON' : (e.code ?? e.message);
    throw new DockerEndpointError(`${source}: cannot read ${metaFile}: ${why}`);
  }
  const endpoint = meta?.Endpoints?.docker;
  const host = typeof endpoint?.Host === 'string' ? endpoint.Host.trim() : '';
  if (!host) throw new DockerEndpointError(`${source}: ${metaFile} has no Endpoints.docker.Host`);
  const tlsDir = join(dir, 'contexts', 'tls', sha, 'docker');
  const skip = endpoint?.SkipTLSVerify === true;
  const files = existsSync(tlsDir) ? pemFiles(tlsDir, source) : {};
  // As the CLI: TLS when the context has TLS material or asks to skip verification.
  const tls = Object.keys(files).length > 0 || skip ? { ...files, verify: !skip } : null;
  return fromHost(host, source, () => tls);
}
