/** Small human formatters for tables. */

/** `in 29m`, `3h ago`, `expired` — relative to `now`. */
export function relativeTime(iso: string | undefined | null, now = Date.now()): string {
  if (!iso) return '-';
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const diff = t - now;
  const abs = Math.abs(diff);
  const span =
    abs < 60_000
      ? `${Math.round(abs / 1000)}s`
      : abs < 3_600_000
        ? `${Math.round(abs / 60_000)}m`
        : abs < 172_800_000
          ? `${Math.round(abs / 3_600_000)}h`
          : `${Math.round(abs / 86_400_000)}d`;
  return diff >= 0 ? `in ${span}` : `${span} ago`;
}

/** `1.2 KiB`, `3 B`. */
export function bytes(n: number): string {
  if (!Number.isFinite(n)) return '-';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[u]}`;
}

/** `a=1,b=2` for a string map; `-` when empty. */
export function labels(map: Record<string, string> | undefined | null): string {
  const entries = Object.entries(map ?? {});
  return entries.length === 0 ? '-' : entries.map(([k, v]) => `${k}=${v}`).join(',');
}

/** A value or `-`. */
export function dash(v: unknown): string {
  return v === undefined || v === null || v === '' ? '-' : String(v);
}
