/**
 * What a command's `run` gets: the client, the output sink, resolved client settings, stdin, env,
 * cwd and a cancel signal. Built once per invocation; the profile file and the client are loaded
 * only when a command asks for them.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { Client } from '../../client/client.js';
import { DEFAULT_URL, normalizeBaseUrl } from '../../client/http.js';
import { CliConfigError } from './errors.js';
import type { Output } from './output/output.js';

export type Env = Record<string, string | undefined>;

/** Global options as commander parsed them. */
export interface GlobalFlags {
  url?: string;
  apiKey?: string;
  adminKey?: string;
  user?: string;
  json?: boolean;
  color?: boolean;
}

/** Client settings after precedence: flag > env > `~/.sbx/client.yaml` > default. */
export interface ClientConfig {
  url: string;
  /** Where the URL came from, for error messages (`--url`, `SBX_URL`, the profile path, `default`). */
  urlSource: string;
  apiKey?: string;
  adminKey?: string;
  user?: string;
  json: boolean;
}

export interface StdinSource {
  stream: Readable & { isTTY?: boolean };
  isTTY: boolean;
}

export interface CliContext {
  readonly out: Output;
  /** The typed client (created on first use). */
  readonly client: Client;
  readonly config: ClientConfig;
  readonly env: Env;
  readonly cwd: string;
  readonly home: string;
  readonly stdin: StdinSource;
  /** Aborted on cancellation: SIGINT/SIGTERM of the process (see signals.ts), or the caller of main(). */
  readonly signal: AbortSignal;
}

export interface ContextInit {
  out: Output;
  flags: GlobalFlags;
  env: Env;
  cwd: string;
  home: string;
  stdin: StdinSource;
  signal: AbortSignal;
  /** False for commands that never call the server (serve, completion…): the profile is not read. */
  useProfile: boolean;
}

interface Profile {
  url?: string;
  api_key?: string;
  admin_key?: string;
  user?: string;
}

/** Path of the client profile. */
export function profilePath(home: string): string {
  return join(home, '.sbx', 'client.yaml');
}

/** Reads and validates `~/.sbx/client.yaml` (absent → empty). */
async function readProfile(path: string): Promise<Profile> {
  if (!existsSync(path)) return {};
  const { parse } = await import('yaml');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new CliConfigError(`cannot read ${path}: ${(err as Error).message}`);
  }
  let data: unknown;
  try {
    data = parse(text);
  } catch (err) {
    throw new CliConfigError(`${path} is not valid YAML: ${yamlReason(err)}`);
  }
  if (data === null || data === undefined) return {};
  if (typeof data !== 'object' || Array.isArray(data))
    throw new CliConfigError(`${path}: expected a mapping of url, api_key, admin_key, user`);
  const out: Profile = {};
  for (const [k, v] of Object.entries(data as Record<string, unknown>)) {
    if (!['url', 'api_key', 'admin_key', 'user'].includes(k))
      throw new CliConfigError(`${path}: unknown key "${k}" (expected url, api_key, admin_key, user)`);
    if (typeof v !== 'string') throw new CliConfigError(`${path}: "${k}" must be a string`);
    out[k as keyof Profile] = v;
  }
  return out;
}

/**
 * One line from a YAML parse error: its reason and position, without the excerpt of the file the
 * library appends (that excerpt may show an api_key).
 */
function yamlReason(err: unknown): string {
  const e = err as { message?: string; linePos?: Array<{ line: number; col: number }> };
  const reason = String(e.message ?? err)
    .replace(/ at line \d+, column \d+:[\s\S]*$/, '')
    .replace(/\s*\n\s*/g, ' ')
    .trim();
  const at = e.linePos?.[0];
  return at ? `line ${at.line}, column ${at.col}: ${reason}` : reason;
}

/** Resolves settings, reading the profile only when a flag or env var leaves something open. */
export async function resolveClientConfig(flags: GlobalFlags, env: Env, home: string, useProfile = true): Promise<ClientConfig> {
  const pick = (flag: string | undefined, envName: string) =>
    flag !== undefined && flag !== '' ? flag : env[envName] ? env[envName] : undefined;
  const url = pick(flags.url, 'SBX_URL');
  const apiKey = pick(flags.apiKey, 'SBX_API_KEY');
  const adminKey = pick(flags.adminKey, 'SBX_ADMIN_API_KEY');
  const user = pick(flags.user, 'SBX_USER_ID');
  const path = profilePath(home);
  const profile = !useProfile || (url && apiKey && adminKey && user) ? {} : await readProfile(path);
  const cfg: ClientConfig = {
    url: url ?? profile.url ?? DEFAULT_URL,
    urlSource: flags.url ? '--url' : env.SBX_URL ? 'SBX_URL' : profile.url ? path : 'default',
    apiKey: apiKey ?? profile.api_key,
    adminKey: adminKey ?? profile.admin_key,
    user: user ?? profile.user,
    json: Boolean(flags.json),
  };
  try {
    cfg.url = normalizeBaseUrl(cfg.url);
  } catch (err) {
    throw new CliConfigError(`invalid server URL ${JSON.stringify(cfg.url)} (from ${cfg.urlSource}): ${(err as Error).message}`);
  }
  return cfg;
}

/** Builds the context; `close()` releases the client's connections. */
export async function createContext(init: ContextInit): Promise<CliContext & { close(): Promise<void> }> {
  let client: Client | undefined;
  // Resolved before the command starts (one stat when there is no profile) so a bad profile
  // fails early, with exit code 3.
  const cfg = await resolveClientConfig(init.flags, init.env, init.home, init.useProfile);
  return {
    out: init.out,
    env: init.env,
    cwd: init.cwd,
    home: init.home,
    stdin: init.stdin,
    signal: init.signal,
    config: cfg,
    get client(): Client {
      client ??= new Client({ url: cfg.url, apiKey: cfg.apiKey, adminKey: cfg.adminKey, userId: cfg.user });
      return client;
    },
    async close() {
      await client?.close();
    },
  };
}
