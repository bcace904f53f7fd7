/**
 * The one rule for showing a URL that may carry credentials (a worker's `rpc_url`, a provider's
 * `base_url`): user-info, query and fragment never leave; an unparseable URL is shown as
 * `[redacted]`, since there is no telling which part is a secret. The stored value stays as given.
 */

const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

export function withoutCredentials(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '[redacted]';
  }
  if (!u.username && !u.password && !u.search && !u.hash) return url;
  u.username = '';
  u.password = '';
  u.search = '';
  u.hash = '';
  return u.toString();
}

/** A shown object's string values that are URLs (`scheme://…`), each through `withoutCredentials`. */
export function urlsWithoutCredentials<T extends Record<string, unknown>>(obj: T): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(obj)) out[k] = typeof v === 'string' && SCHEME.test(v) ? withoutCredentials(v) : v;
  return out as T;
}
