/**
 * Go-style durations: parse `30s`, `5m`, `1h30m`, `250ms`, `1.5h`, `1µs`; render the long form
 * Go prints (`2h0m0s`, `1m30s`, `250ms`, `1µs`, `0s`). Internally durations are milliseconds,
 * fractional below one millisecond, so `1us` and `1ns` survive a round trip.
 */

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};

const PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/y;

/**
 * The longest duration accepted (100 × 365 days). Anything longer has no use as a TTL or timeout,
 * and `now + ttl` must stay a representable date (Go itself stops at ~292 years).
 */
export const MAX_DURATION_MS = 876_000 * 3_600_000;
const MAX_DURATION_TEXT = '876000h';

/** Parses without the range bound; null when malformed. */
function parseUnbounded(input: string): number | null {
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

/** Parses a Go duration string into milliseconds; null when malformed or longer than MAX_DURATION_MS. */
export function tryParseDuration(input: string): number | null {
  const ms = parseUnbounded(input);
  return ms === null || Math.abs(ms) > MAX_DURATION_MS ? null : ms;
}

/**
 * What is wrong with a duration, as a message naming the field; null when it is good. The caller
 * turns it into its own error (core: `bad_request`; config: a load error).
 */
export function durationProblem(input: string, field = 'duration'): string | null {
  const ms = parseUnbounded(input);
  if (ms === null) return `${field}: invalid duration ${JSON.stringify(input)} (use forms like 30s, 5m, 1h30m)`;
  if (Math.abs(ms) > MAX_DURATION_MS) {
    return `${field}: duration ${JSON.stringify(input)} is too long (the maximum is ${MAX_DURATION_TEXT}, 100 years)`;
  }
  return null;
}

/** True when the duration is a whole number of seconds (quota rule). */
export function isWholeSeconds(ms: number): boolean {
  return Number.isInteger(ms / 1000);
}

/** Renders milliseconds exactly as Go's time.Duration.String does, to the nanosecond. */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return '0s';
  const neg = ms < 0;
  const abs = Math.abs(ms);
  // Whole milliseconds and the sub-millisecond rest apart, so large values keep their nanoseconds.
  const whole = Math.floor(abs);
  const ns = BigInt(whole) * 1_000_000n + BigInt(Math.round((abs - whole) * 1e6));
  if (ns === 0n) return '0s';
  let out: string;
  if (ns < 1_000_000_000n) {
    if (ns < 1_000n) out = `${ns}ns`;
    else if (ns < 1_000_000n) out = `${withFraction(ns, 3)}µs`;
    else out = `${withFraction(ns, 6)}ms`;
  } else {
    const totalSeconds = ns / 1_000_000_000n;
    const s = `${withFraction(ns % 60_000_000_000n, 9)}s`;
    const minutes = totalSeconds / 60n;
    if (minutes === 0n) out = s;
    else if (minutes < 60n) out = `${minutes}m${s}`;
    else out = `${minutes / 60n}h${minutes % 60n}m${s}`;
  }
  return neg ? `-${out}` : out;
}

/** `v / 10^digits` with the fraction's trailing zeros (and a bare point) dropped, as Go's fmtFrac. */
function withFraction(v: bigint, digits: number): string {
  const unit = 10n ** BigInt(digits);
  const frac = (v % unit).toString().padStart(digits, '0').replace(/0+$/, '');
  return frac === '' ? `${v / unit}` : `${v / unit}.${frac}`;
}
