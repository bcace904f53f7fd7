/** Parsers for command-line values; each throws UsageError (exit 2) with a precise message. */
import { tryParseDuration } from '../../../shared/duration.js';
import { UsageError } from '../errors.js';

/** `K=V` → [K, V]; the key must be non-empty, the value may contain `=`. */
export function parseKeyValue(raw: string, flag: string): [string, string] {
  const eq = raw.indexOf('=');
  if (eq <= 0) throw new UsageError(`${flag} expects KEY=VALUE, got ${JSON.stringify(raw)}`);
  return [raw.slice(0, eq), raw.slice(eq + 1)];
}

/** A non-negative integer. */
export function parseCount(raw: string, flag: string): number {
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`${flag} expects a whole number, got ${JSON.stringify(raw)}`);
  return Number(raw.trim());
}

/** A Go-style duration string, returned unchanged when valid. */
export function parseDurationFlag(raw: string, flag: string): string {
  const ms = tryParseDuration(raw);
  if (ms === null || ms < 0) throw new UsageError(`${flag} expects a duration like 30s, 5m or 1h30m, got ${JSON.stringify(raw)}`);
  return raw.trim();
}

/** An octal file mode (`644`, `0755`). */
export function parseMode(raw: string, what = 'mode'): string {
  if (!/^0?[0-7]{3,4}$/.test(raw)) throw new UsageError(`${what} must be octal like 644 or 0755, got ${JSON.stringify(raw)}`);
  return raw;
}

/** `ID:/path` → {id, path}; `ID` alone gives `fallback` as the path when one is allowed. */
export function parseRemote(raw: string, fallback?: string): { id: string; path: string } {
  const colon = raw.indexOf(':');
  if (colon < 0) {
    if (fallback !== undefined && raw !== '') return { id: raw, path: fallback };
    throw new UsageError(`expected SANDBOX_ID:/path, got ${JSON.stringify(raw)}`);
  }
  const id = raw.slice(0, colon);
  const path = raw.slice(colon + 1);
  if (id === '') throw new UsageError(`missing sandbox id in ${JSON.stringify(raw)} (use SANDBOX_ID:/path)`);
  if (path === '') {
    if (fallback !== undefined) return { id, path: fallback };
    throw new UsageError(`missing path in ${JSON.stringify(raw)} (use SANDBOX_ID:/path)`);
  }
  return { id, path };
}

/** True when the argument names a sandbox path (`ID:/path`) rather than a local one. */
export function isRemote(raw: string): boolean {
  const colon = raw.indexOf(':');
  return colon > 0 && !raw.slice(0, colon).includes('/');
}
