/**
 * Secret values in a loaded config, for log scrubbing and redacted diagnostics. The schema
 * marks which keys are secrets, so a new secret key is covered without touching this file.
 */
import { isSecretLeaf, leafEntries } from './schema.js';
import type { SbxConfig } from './types.js';

export const REDACTED = '[redacted]';

type Obj = Record<string, unknown>;

function getIn(root: unknown, path: string[]): unknown {
  let node = root;
  for (const part of path) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Obj)[part];
  }
  return node;
}

/** The password inside a DSN, URL form (`postgres://u:p@h/db`) or key=value form (`password=p`). */
export function dsnPassword(dsn: string): string | undefined {
  try {
    const url = new URL(dsn);
    if (url.password) return decodeURIComponent(url.password);
    const query = url.searchParams.get('password');
    if (query) return query;
  } catch {
    // Not a URL: try the libpq key=value form.
  }
  const kv = /(?:^|\s)password\s*=\s*(?:'((?:[^'\\]|\\.)*)'|(\S+))/.exec(dsn);
  return kv ? (kv[1] ?? kv[2]) : undefined;
}

const REGISTRY_SECRET_FIELDS = ['password', 'auth', 'identitytoken', 'registrytoken', 'token'];

function registrySecrets(value: unknown): string[] {
  if (typeof value === 'string') {
    const out = [value];
    // An encoded X-Registry-Auth header is base64(url) JSON; its password can surface decoded.
    try {
      const decoded: unknown = JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
      if (typeof decoded === 'object' && decoded !== null) out.push(...registrySecrets(decoded));
    } catch {
      // Not an encoded auth object: the whole string is the secret.
    }
    return out;
  }
  if (typeof value === 'object' && value !== null) {
    return Object.entries(value as Obj)
      .filter(([k, v]) => REGISTRY_SECRET_FIELDS.includes(k.toLowerCase()) && typeof v === 'string')
      .map(([, v]) => v as string);
  }
  return [];
}

/** Every configured secret value (keys, tokens, signing keys, DSN and its password, provider and registry credentials). */
export function secretValues(config: SbxConfig): string[] {
  const out: string[] = [];
  for (const { path, leaf } of leafEntries()) {
    if (!isSecretLeaf(leaf)) continue;
    const value = getIn(config, path);
    if (leaf.kind === 'registry_auth') out.push(...registrySecrets(value));
    else if (typeof value === 'string') out.push(value);
    else if (Array.isArray(value)) out.push(...value.filter((v): v is string => typeof v === 'string'));
    else if (typeof value === 'object' && value !== null)
      out.push(...Object.values(value).filter((v): v is string => typeof v === 'string'));
  }
  const dsn = config.database.dsn;
  if (dsn) {
    const password = dsnPassword(dsn);
    if (password) out.push(password);
  }
  return [...new Set(out.filter((s) => s !== ''))];
}

function redactDsn(dsn: string): string {
  try {
    const url = new URL(dsn);
    if (url.password) {
      url.password = 'redacted';
      return url.toString().replace(':redacted@', `:${REDACTED}@`);
    }
    // A password may also ride in the query string (`?password=`).
    if (url.host && !/password/i.test(url.search)) return dsn;
  } catch {
    // Not a URL.
  }
  return REDACTED;
}

/** A deep copy of the config with every secret value replaced by "[redacted]" (`_file` paths are kept). */
export function redactConfig(config: SbxConfig): SbxConfig {
  const copy = structuredClone(config);
  for (const { path, leaf } of leafEntries()) {
    if (!isSecretLeaf(leaf)) continue;
    const parent = getIn(copy, path.slice(0, -1)) as Obj | undefined;
    const key = path[path.length - 1]!;
    const value = parent?.[key];
    if (!parent || value === undefined || value === '') continue;
    if (path.join('.') === 'database.dsn' && typeof value === 'string') parent[key] = redactDsn(value);
    else if (Array.isArray(value)) parent[key] = value.map(() => REDACTED);
    else if (leaf.kind === 'map' && typeof value === 'object' && value !== null) {
      parent[key] = Object.fromEntries(Object.keys(value).map((k) => [k, REDACTED]));
    } else parent[key] = REDACTED;
  }
  return copy;
}
