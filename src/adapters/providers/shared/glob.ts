/**
 * Glob patterns over absolute sandbox paths: `*` and `?` never cross `/`, `[...]` is a character
 * class (`[!...]` or `[^...]` negates), `**` as a whole segment spans zero or more directories,
 * `\` escapes the next character. Dotfiles match like any other name (as in Go's filepath.Match).
 */

const META = /[*?[\\]/;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

/** Translates one path segment (no `/`) into a regular expression source. */
function segmentSource(seg: string): string {
  let out = '';
  for (let i = 0; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === '\\' && i + 1 < seg.length) {
      out += escapeRegExp(seg[++i]!);
    } else if (c === '*') {
      while (seg[i + 1] === '*') i++;
      out += '[^/]*';
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '[') {
      const cls = classSource(seg, i);
      if (cls) {
        out += cls.source;
        i = cls.end;
      } else {
        out += '\\[';
      }
    } else {
      out += escapeRegExp(c);
    }
  }
  return out;
}

/** Parses `[...]` starting at `start`; null when it is not closed (then `[` is literal). */
function classSource(seg: string, start: number): { source: string; end: number } | null {
  let i = start + 1;
  let negate = false;
  if (seg[i] === '!' || seg[i] === '^') {
    negate = true;
    i++;
  }
  let body = '';
  let first = true;
  for (; i < seg.length; i++) {
    const c = seg[i]!;
    if (c === ']' && !first) {
      // Segments hold no `/`, so only a negated class must be kept from matching one.
      return { source: negate ? `[^/${body}]` : `[${body}]`, end: i };
    }
    first = false;
    if (c === '\\' && i + 1 < seg.length) {
      body += '\\' + seg[++i];
    } else if (c === '-' && body.length > 0 && seg[i + 1] !== ']') {
      body += '-';
    } else {
      body += /[\]\\^-]/.test(c) ? '\\' + c : c;
    }
  }
  return null;
}

/** Compiles an absolute glob pattern to an anchored RegExp over absolute paths. */
export function globToRegExp(pattern: string): RegExp {
  const segs = pattern.split('/').filter((s) => s.length > 0);
  let src = '';
  segs.forEach((seg, idx) => {
    if (seg === '**') {
      // Trailing `/**` also matches the directory itself; inner `/**/` matches zero or more levels.
      src += idx === segs.length - 1 ? '(?:/.*)?' : '(?:/[^/]+)*';
    } else {
      // Names are never empty: `/*` lists what is under `/`, never `/` itself.
      src += '/(?=[^/])' + segmentSource(seg);
    }
  });
  return new RegExp(`^${src || '/'}$`);
}

/** True when the absolute `path` matches the glob `pattern`. */
export function globMatch(pattern: string, path: string): boolean {
  return globToRegExp(pattern).test(path);
}

export interface GlobPlan {
  /** Longest literal directory prefix: where a walk starts. */
  base: string;
  /** How many levels below `base` can match (Infinity with `**`). */
  depth: number;
  regex: RegExp;
}

/** Splits a pattern into a literal base to walk from, a depth bound and the matcher. */
export function planGlob(pattern: string): GlobPlan {
  const segs = pattern.split('/').filter((s) => s.length > 0);
  const firstMeta = segs.findIndex((s) => META.test(s));
  const literal = firstMeta === -1 ? segs : segs.slice(0, firstMeta);
  const rest = firstMeta === -1 ? [] : segs.slice(firstMeta);
  return {
    base: '/' + literal.join('/'),
    depth: rest.includes('**') ? Infinity : rest.length,
    regex: globToRegExp(pattern),
  };
}
