/**
 * Steps after all sources are merged: path expansion, secret `_file` twins, and checks that
 * involve more than one key.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { Problems } from './errors.js';
import { isSecretLeaf, leafEntries } from './schema.js';
import type { SbxConfig } from './types.js';

type Obj = Record<string, unknown>;

/** Expands a leading `~` against `home` and makes relative paths absolute against `cwd`. */
export function expandPath(p: string, home: string, cwd: string): string {
  if (p === '~') return home;
  if (p.startsWith('~/')) return join(home, p.slice(2));
  return isAbsolute(p) ? p : resolve(cwd, p);
}

function parentOf(config: SbxConfig, path: string[]): Obj {
  let node = config as unknown as Obj;
  for (const part of path.slice(0, -1)) node = node[part] as Obj;
  return node;
}

const isSet = (v: unknown): v is string => typeof v === 'string' && v !== '';

/** Expands every path-valued key (`~`, relative paths); SQLite's `:memory:` is left alone. */
export function expandPaths(config: SbxConfig, home: string, cwd: string): void {
  for (const { path, leaf } of leafEntries()) {
    if (leaf.kind !== 'string' || !leaf.path) continue;
    const parent = parentOf(config, path);
    const key = path[path.length - 1]!;
    const value = parent[key];
    if (!isSet(value) || value === ':memory:') continue;
    parent[key] = expandPath(value, home, cwd);
  }
}

/**
 * Fills each secret from its `_file` twin (content trimmed). Setting both is a problem, as is a
 * file that cannot be read or is empty; messages name the path, never the content.
 */
export function resolveSecretFiles(config: SbxConfig, origin: Map<string, string>, problems: Problems): void {
  for (const { path, leaf } of leafEntries()) {
    if (leaf.kind !== 'string' || !leaf.twinOf) continue;
    const parent = parentOf(config, path);
    const fileKey = path.join('.');
    const secretKey = [...path.slice(0, -1), leaf.twinOf].join('.');
    const file = parent[path[path.length - 1]!];
    if (!isSet(file)) continue;
    if (isSet(parent[leaf.twinOf])) {
      const from = [...new Set([origin.get(secretKey) ?? 'defaults', origin.get(fileKey) ?? 'defaults'])].join(' and ');
      problems.add(secretKey, `set together with ${fileKey}; set only one of them`, from);
      continue;
    }
    let content: string;
    try {
      content = readFileSync(file, 'utf8').trim();
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? 'error'})`;
      problems.add(fileKey, `secret file ${file} ${why}`, origin.get(fileKey) ?? 'defaults');
      continue;
    }
    if (content === '') {
      problems.add(fileKey, `secret file ${file} is empty`, origin.get(fileKey) ?? 'defaults');
      continue;
    }
    parent[leaf.twinOf] = content;
  }
}

const isBlank = (v: unknown): boolean => typeof v === 'string' && v.trim() === '';

/**
 * A credential that is only whitespace can never be presented (header values arrive trimmed), so
 * it would start a server that answers 401 to everyone. `''` stays "not set" for single keys (an
 * empty `admin_api_key` means "fall back to api_key", spec 5.1); a map or list entry has no unset
 * form, so an empty one is blank too. Values are never echoed. Run after secret files are read.
 */
export function checkBlankSecrets(config: SbxConfig, origin: Map<string, string>, problems: Problems): void {
  for (const { path, leaf } of leafEntries()) {
    if (!isSecretLeaf(leaf) || leaf.kind === 'registry_auth') continue;
    const key = path.join('.');
    const value = parentOf(config, path)[path[path.length - 1]!];
    const from = origin.get(key) ?? 'defaults';
    const fix = 'set a real value or remove the key';
    if (typeof value === 'string' && value !== '' && isBlank(value)) {
      problems.add(key, `is blank (only whitespace); ${fix}`, from);
    } else if (Array.isArray(value)) {
      value.forEach((v, i) => {
        if (isBlank(v)) problems.add(`${key}[${i}]`, `is blank; ${fix}`, from);
      });
    } else if (typeof value === 'object' && value !== null) {
      for (const [id, v] of Object.entries(value as Obj)) if (isBlank(v)) problems.add(`${key}.${id}`, `is blank; ${fix}`, from);
    }
  }
}

/** A start-up notice about how the config was read: `serve` logs it, `lint` has its own finding. */
export interface ConfigNote {
  level: 'info' | 'warn';
  key: string;
  message: string;
}

/**
 * `auth.enabled` left unset (it came from the defaults) while `auth.api_key` (or its file) is set
 * means enabled (DESIGN.md §3 "Auth"). An admin key alone does not switch it on: it protects only
 * the admin routes. An explicit `false` beside a user key is kept and warned about. Run after
 * secret files are read, before crossCheck. Notes name keys and sources, never values.
 */
export function deriveAuthEnabled(config: SbxConfig, origin: Map<string, string>): ConfigNote[] {
  const { auth } = config;
  if (!isSet(auth.api_key)) return [];
  const keyFrom = origin.get(isSet(auth.api_key_file) ? 'auth.api_key_file' : 'auth.api_key') ?? 'defaults';
  const keyName = isSet(auth.api_key_file) ? 'auth.api_key_file' : 'auth.api_key';
  const enabledFrom = origin.get('auth.enabled');
  if (enabledFrom === undefined) {
    auth.enabled = true;
    origin.set('auth.enabled', `${keyName} (${keyFrom})`);
    return [
      {
        level: 'info',
        key: 'auth.enabled',
        message: `auth on: ${keyName} is set (from ${keyFrom}) and auth.enabled is unset, so every API route needs X-API-Key`,
      },
    ];
  }
  if (!auth.enabled) {
    return [
      {
        level: 'warn',
        key: 'auth.enabled',
        message:
          `auth.enabled is false (from ${enabledFrom}) although ${keyName} is set (from ${keyFrom}): ` +
          `the key is ignored and the API is open; remove auth.enabled: false to turn auth on`,
      },
    ];
  }
  return [];
}

/** Checks that span keys: auth needs a key, postgres needs a DSN. Run after secret files are read. */
export function crossCheck(config: SbxConfig, origin: Map<string, string>, problems: Problems): void {
  const { auth, database } = config;
  if (auth.enabled && !isSet(auth.api_key) && !isSet(auth.api_key_file)) {
    problems.add(
      'auth.enabled',
      'auth is enabled but no auth.api_key or auth.api_key_file is set',
      origin.get('auth.enabled') ?? 'defaults',
    );
  }
  if (database.driver === 'postgres' && !isSet(database.dsn) && !isSet(database.dsn_file)) {
    problems.add('database.driver', 'postgres needs database.dsn or database.dsn_file', origin.get('database.driver') ?? 'defaults');
  }
}
