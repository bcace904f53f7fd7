const MARK = '[redacted]';

/**
 * A function that replaces every configured secret value in a text. Values shorter than 4
 * characters are skipped (they would shred ordinary words); longer ones are matched first.
 */
export function secretScrubber(secrets: readonly string[] | undefined): (text: string) => string {
  const list = [...new Set((secrets ?? []).filter((s) => s.length >= 4))].sort((a, b) => b.length - a.length);
  if (list.length === 0) return (text) => text;
  return (text) => {
    let out = text;
    for (const s of list) if (out.includes(s)) out = out.split(s).join(MARK);
    return out;
  };
}

/** A deep copy of plain JSON data with every string passed through `scrub` (keys included). */
export function scrubDeep<T>(value: T, scrub: (text: string) => string): T {
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return scrub(v);
    if (Array.isArray(v)) return v.map(walk);
    if (v && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[scrub(k)] = walk(x);
      return out;
    }
    return v;
  };
  return walk(value) as T;
}
