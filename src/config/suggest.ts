import { SCHEMA, type Group } from './schema.js';

/** Edit distance counting a swap of two neighbours as one edit (the commonest typo). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[i - 2]![j - 2]! + 1);
      d[i]![j] = v;
    }
  }
  return d[a.length]![b.length]!;
}

function allPaths(node: Group, prefix: string[] = []): string[][] {
  const out: string[][] = [];
  for (const [key, child] of Object.entries(node.keys)) {
    out.push([...prefix, key]);
    if (child.kind === 'group') out.push(...allPaths(child, [...prefix, key]));
  }
  return out;
}

/**
 * Suggests the key meant by an unknown one: a close sibling first (typo), else the same name
 * elsewhere in the tree (`api_key` at the top level → `auth.api_key`).
 */
export function suggestKey(unknown: string, group: Group, prefix: string[]): string | undefined {
  const lower = unknown.toLowerCase().replace(/-/g, '_');
  let best: { key: string; d: number } | undefined;
  for (const key of Object.keys(group.keys)) {
    const d = distance(lower, key);
    if (d <= Math.max(1, Math.floor(key.length / 3)) && (!best || d < best.d)) best = { key, d };
  }
  if (best) return [...prefix, best.key].join('.');
  const elsewhere = allPaths(SCHEMA).filter((p) => p[p.length - 1] === lower);
  return elsewhere.length > 0 ? elsewhere.map((p) => p.join('.')).join(' or ') : undefined;
}
