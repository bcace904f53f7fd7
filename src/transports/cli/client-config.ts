/**
 * Client settings of a CLI run: flag > env > `~/.sbx/client.yaml` > default. One module for the full
 * CLI (context.ts) and the `sbx exec` fast path (fast-exec.ts) alike, so both read the same files
 * and env vars with the same precedence and the same errors.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_URL, normalizeBaseUrl } from '../../client/http.js';
import { CliConfigError } from './errors.js';

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
