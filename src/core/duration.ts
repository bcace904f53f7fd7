/**
 * Go-style durations: parse `30s`, `5m`, `1h30m`, `250ms`, `1.5h`; render the long form
 * Go prints (`2h0m0s`, `1m30s`, `250ms`, `0s`). Internally durations are milliseconds.
 */
import { badRequest } from './errors.js';

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3,
  'μs': 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/** Parses a Go duration string into milliseconds; returns null when malformed. */
export function tryParseDuration(input: string): number | null {
  if (typeof input !== 'string') return null;
  let s = input.trim();
  if (s === '') return null;
  let sign = 1;
  if (s[0] === '-' || s[0] === '+') {
    if (s[0] === '-') sign = -1;
    s = s.slice(1);
  }
  if (s === '0') return 0;
  let total = 0;
  PART.lastIndex = 0;
  let pos = 0;
  while (pos < s.length) {
    PART.lastIndex = pos;
    const m = PART.exec(s);
    if (!m || m.index !== pos) return null;
    total += Number(m[1]) * UNIT_MS[m[2]!]!;
    pos = PART.lastIndex;
  }
  if (!Number.isFinite(total)) return null;
  return sign * total;
}

/** Parses a duration or throws `bad_request` naming the field. */
export function parseDuration(input: string, field = 'duration'): number {
  const ms = tryParseDuration(input);
  if (ms === null) {
    throw badRequest(`${field}: invalid duration ${JSON.stringify(input)} (use forms like 30s, 5m, 1h30m)`);
  }
  return ms;
}

/** True when the duration is a whole number of seconds (quota rule). */
export function isWholeSeconds(ms: number): boolean {
  return Number.isInteger(ms / 1000);
}

/** Renders milliseconds the way Go's time.Duration.String does (ms precision). */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '0s';
  if (ms === 0) return '0s';
  const neg = ms < 0;
  let rest = Math.abs(ms);
  let out: string;
  if (rest < 1000) {
    out = `${trimFloat(rest)}ms`;
  } else {
    const h = Math.floor(rest / 3_600_000);
    rest -= h * 3_600_000;
    const m = Math.floor(rest / 60_000);
    rest -= m * 60_000;
    const s = trimFloat(rest / 1000);
    out = h > 0 ? `${h}h${m}m${s}s` : m > 0 ? `${m}m${s}s` : `${s}s`;
  }
  return neg ? `-${out}` : out;
}

function trimFloat(n: number): string {
  return String(Math.round(n * 1000) / 1000);
}
