/**
 * Applies one source (a parsed file, the env layer, the overrides) onto the config tree,
 * checking each value against the schema. Bad values are reported and skipped, so a load
 * can list every problem at once.
 */
import { tryParseDuration } from '../shared/duration.js';
import type { Problems } from './errors.js';
import type { Group, Leaf } from './schema.js';
import { suggestKey } from './suggest.js';

export interface LayerContext {
  problems: Problems;
  /** dotted key → the source that set it last (for messages about combinations of keys). */
  origin: Map<string, string>;
  /** The source label for a dotted key in this layer (file path, env var name, `overrides`). */
  sourceOf(key: string): string;
}

type Obj = Record<string, unknown>;

export function isPlainObject(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Describes a bad value for a message; secrets are described by type only. */
function shown(value: unknown, secret: boolean): string {
  const type = Array.isArray(value) ? 'a list' : value === null ? 'null' : isPlainObject(value) ? 'a mapping' : `a ${typeof value}`;
  if (secret || isPlainObject(value) || Array.isArray(value)) return type;
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/** Checks one value against its leaf; returns the value to store, or a problem. */
export function checkLeaf(leaf: Leaf, value: unknown): { value: unknown } | { problem: string } {
  const got = (secret = false) => `got ${shown(value, secret)}`;
  switch (leaf.kind) {
    case 'string':
      if (typeof value !== 'string') return { problem: `expected a string, ${got(leaf.secret)}` };
      if (leaf.nonEmpty && value.trim() === '') return { problem: 'must not be empty' };
      return { value };
    case 'duration': {
      if (typeof value !== 'string') return { problem: `expected a duration string such as 30s, 5m or 1h30m, ${got()}` };
      const ms = tryParseDuration(value);
      if (ms === null) return { problem: `invalid duration ${JSON.stringify(value)} (use forms like 30s, 5m, 1h30m)` };
      if (ms < 0) return { problem: `must not be negative, got ${JSON.stringify(value)}` };
      if (leaf.positive && ms === 0) return { problem: 'must be greater than 0s' };
      return { value };
    }
    case 'int':
      if (typeof value !== 'number' || !Number.isInteger(value)) return { problem: `expected an integer, ${got()}` };
      if (leaf.max !== undefined && (value < leaf.min || value > leaf.max))
        return { problem: `must be between ${leaf.min} and ${leaf.max}, got ${value}` };
      if (value < leaf.min)
        return { problem: leaf.min === 0 ? `must not be negative, got ${value}` : `must be at least ${leaf.min}, got ${value}` };
      return { value };
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) return { problem: `expected a number, ${got()}` };
      if (value <= 0) return { problem: `must be greater than 0, got ${value}` };
      return { value };
    case 'bool':
      if (typeof value !== 'boolean') return { problem: `expected true or false, ${got()}` };
      return { value };
    case 'enum':
      if (typeof value !== 'string' || !leaf.values.includes(value))
        return { problem: `must be one of ${leaf.values.join(', ')}; ${got()}` };
      return { value };
    case 'list':
      if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
        return { problem: `expected a list of strings, ${got(leaf.secret)}` };
      return { value: [...value] };
    case 'map':
      if (!isPlainObject(value) || !Object.values(value).every((v) => typeof v === 'string')) {
        return { problem: `expected a mapping of names to strings, ${got(leaf.secret)}` };
      }
      if (Object.keys(value).some((k) => k.trim() === '')) return { problem: 'map keys must not be empty' };
      return { value: { ...value } };
    case 'uid_gid': {
      const text = typeof value === 'number' && Number.isInteger(value) && value >= 0 ? String(value) : value;
      const ids = typeof text === 'string' ? /^(?:(\d{1,10})(?::(\d{1,10}))?)?$/.exec(text.trim()) : null;
      // (uid_t)-1 means "no change" to the kernel: the largest id is one less.
      if (!ids || [ids[1], ids[2]].some((id) => id !== undefined && Number(id) > 2 ** 32 - 2)) {
        return {
          problem:
            `expected a numeric uid or uid:gid such as 65534 or 1000:1000 (user names cannot be ` +
            `resolved before the container exists), ${got()}`,
        };
      }
      return { value: ids[0] };
    }
    case 'registry_auth':
      if (typeof value === 'string') return { value };
      if (isPlainObject(value) && Object.values(value).every((v) => typeof v === 'string')) return { value: { ...value } };
      return { problem: `expected a string or a mapping of strings, ${got(true)}` };
  }
}

/** Applies `raw` (one source's tree) onto `target` under `group`; maps merge by entry, everything else replaces. */
export function applyLayer(target: Obj, raw: unknown, group: Group, prefix: string[], ctx: LayerContext): void {
  if (!isPlainObject(raw)) {
    const key = prefix.length > 0 ? prefix.join('.') : '(top level)';
    ctx.problems.add(key, `expected a mapping of keys, got ${shown(raw, true)}`, ctx.sourceOf(key));
    return;
  }
  for (const [key, value] of Object.entries(raw)) {
    const path = [...prefix, key];
    const dotted = path.join('.');
    const node = group.keys[key];
    if (!node) {
      const hint = suggestKey(key, group, prefix);
      ctx.problems.add(dotted, hint ? `unknown key; did you mean ${hint}?` : 'unknown key', ctx.sourceOf(dotted));
      continue;
    }
    // An empty YAML key (`api_key:`) or an undefined override means "not set here".
    if (value === undefined || value === null) continue;
    if (node.kind === 'group') {
      if (!isPlainObject(target[key])) target[key] = {};
      applyLayer(target[key] as Obj, value, node, path, ctx);
      continue;
    }
    const checked = checkLeaf(node, value);
    if ('problem' in checked) {
      ctx.problems.add(dotted, checked.problem, ctx.sourceOf(dotted));
      continue;
    }
    target[key] =
      node.kind === 'map' && isPlainObject(target[key]) ? { ...(target[key] as Obj), ...(checked.value as Obj) } : checked.value;
    ctx.origin.set(dotted, ctx.sourceOf(dotted));
  }
}
