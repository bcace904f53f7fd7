/**
 * `SVC_*` environment variables → a config layer. Names are resolved against the schema
 * (not split on `_`), so keys with underscores map unambiguously: SVC_DEFAULTS_MAX_TTL is
 * defaults.max_ttl. Map entries: SVC_AUTH_WORKER_TOKENS_<ID> → auth.worker_tokens.<id>.
 */
import type { Problems } from './errors.js';
import { isPlainObject } from './apply.js';
import { leafEntries, type Leaf, type LeafEntry } from './schema.js';

export const ENV_PREFIX = 'SVC_';

/** The environment variable for a dotted key path (`auth.api_key` → `SVC_AUTH_API_KEY`). */
export function envName(path: string[] | string): string {
  const parts = typeof path === 'string' ? path.split('.') : path;
  return ENV_PREFIX + parts.join('_').toUpperCase().replace(/-/g, '_');
}

const BY_NAME = new Map<string, LeafEntry>(leafEntries().map((e) => [envName(e.path), e]));
const MAPS = leafEntries().filter((e) => e.leaf.kind === 'map');

export interface EnvLayer {
  /** The nested tree to apply, values already converted from strings where the kind is clear. */
  raw: Record<string, unknown>;
  /** dotted key → the variable(s) that set it. */
  sources: Map<string, string>;
  /** Variables that mapped to a key, sorted. */
  used: string[];
}

function setIn(tree: Record<string, unknown>, path: string[], value: unknown): void {
  let node = tree;
  for (const part of path.slice(0, -1)) {
    if (!isPlainObject(node[part])) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[path[path.length - 1]!] = value;
}

/** Converts an env string by the leaf's kind; a value that does not convert passes through as a string for the schema check to report. */
function convert(leaf: Leaf, value: string): { value: unknown } | { problem: string } {
  const v = value.trim();
  switch (leaf.kind) {
    case 'bool':
      if (/^(true|1)$/i.test(v)) return { value: true };
      if (/^(false|0)$/i.test(v)) return { value: false };
      return { value };
    case 'int':
      return /^[+-]?\d+$/.test(v) ? { value: Number(v) } : { value };
    case 'number':
      return v !== '' && Number.isFinite(Number(v)) ? { value: Number(v) } : { value };
    case 'list':
      return {
        value: value
          .split(',')
          .map((s) => s.trim())
          .filter((s) => s !== ''),
      };
    case 'map':
    case 'registry_auth': {
      if (leaf.kind === 'registry_auth' && !v.startsWith('{')) return { value };
      try {
        const parsed: unknown = JSON.parse(v);
        if (isPlainObject(parsed)) return { value: parsed };
      } catch {
        // The parser's message quotes the input, which may be a secret.
      }
      return { problem: 'expected a JSON object of names to strings (value not shown)' };
    }
    default:
      return { value };
  }
}

/** Reads `SVC_*` variables into a layer; unknown names are ignored, empty values mean "not set". */
export function readEnv(env: Record<string, string | undefined>, problems: Problems): EnvLayer {
  const raw: Record<string, unknown> = {};
  const sources = new Map<string, string>();
  const used: string[] = [];
  const entries: { map: LeafEntry; id: string; name: string; value: string }[] = [];

  for (const name of Object.keys(env).sort()) {
    const value = env[name];
    if (!name.startsWith(ENV_PREFIX) || value === undefined || value === '') continue;
    const exact = BY_NAME.get(name);
    if (exact) {
      const dotted = exact.path.join('.');
      const converted = convert(exact.leaf, value);
      used.push(name);
      if ('problem' in converted) {
        problems.add(dotted, converted.problem, name);
        continue;
      }
      setIn(raw, exact.path, converted.value);
      sources.set(dotted, name);
      continue;
    }
    const map = MAPS.find((m) => name.startsWith(`${envName(m.path)}_`));
    if (map) {
      const id = name.slice(envName(map.path).length + 1).toLowerCase();
      if (id !== '') entries.push({ map, id, name, value });
    }
  }

  // Single entries are applied over a whole-map JSON value, whichever came first.
  for (const { map, id, name, value } of entries) {
    const dotted = map.path.join('.');
    let node = raw as Record<string, unknown>;
    for (const part of map.path) {
      if (!isPlainObject(node[part])) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[id] = value;
    used.push(name);
    sources.set(dotted, sources.has(dotted) ? `${sources.get(dotted)}, ${name}` : name);
  }
  used.sort();
  return { raw, sources, used };
}
