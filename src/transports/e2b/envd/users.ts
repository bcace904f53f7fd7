import { isSbxError } from '../../../core/errors.js';
import { readAll } from '../../../core/sandboxes/file-bytes.js';
import type { EnvdDeps } from './deps.js';
import type { EnvdTarget } from './target.js';

/** E2B's default user: commands and files act as it unless the call names another. */
export const DEFAULT_USER = 'user';

/** An account of the sandbox's `/etc/passwd`. */
export interface Account {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

const CACHE_MS = 30_000;
const CACHE_MAX = 1_000;
/** /etc/passwd larger than this is not read (an account list, not a data file). */
const PASSWD_MAX = 1024 * 1024;
const cache = new Map<string, { at: number; accounts: Map<string, Account> }>();

/**
 * The user an envd call names: `Authorization: Basic base64("<user>:")` as E2B's SDK sends it
 * (`username` on `/files`), else E2B's default `user`.
 */
export function userOf(authorization: string | null | undefined, query?: string | null): string {
  if (query) return query;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(authorization?.trim() ?? '');
  if (m) {
    const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
    const name = decoded.split(':')[0] ?? '';
    if (name !== '') return name;
  }
  return DEFAULT_USER;
}

/**
 * The account `name` in the sandbox (DESIGN.md §14: a command runs as that user when the sandbox
 * has it, else as the sandbox's default user): null when the sandbox has no such account, no
 * readable `/etc/passwd`, or is a pool workspace (whose uid is the tenant's, never chosen here).
 * Read through the file API and kept 30 s per sandbox.
 */
export async function accountOf(deps: EnvdDeps, t: EnvdTarget, name: string): Promise<Account | null> {
  if (deps.settings.pool.enabled) return null;
  const now = Date.now();
  let entry = cache.get(t.rec.id);
  if (!entry || now - entry.at > CACHE_MS) {
    entry = { at: now, accounts: await readAccounts(deps, t) };
    if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
    cache.set(t.rec.id, entry);
  }
  return entry.accounts.get(name) ?? null;
}

async function readAccounts(deps: EnvdDeps, t: EnvdTarget): Promise<Map<string, Account>> {
  const out = new Map<string, Account>();
  let text: string;
  try {
    const file = await deps.files.open(t.rec.id, '/etc/passwd', t.caller);
    if (file.size > PASSWD_MAX) {
      await file.body[Symbol.asyncIterator]().return?.();
      return out;
    }
    text = Buffer.from(await readAll(file)).toString('utf8');
  } catch (err) {
    if (isSbxError(err)) return out;
    throw err;
  }
  for (const line of text.split('\n')) {
    const f = line.split(':');
    if (f.length < 7) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    if (!f[0] || !Number.isInteger(uid) || !Number.isInteger(gid) || uid < 0 || gid < 0) continue;
    out.set(f[0], { name: f[0], uid, gid, home: f[5]?.startsWith('/') ? f[5] : '/' });
  }
  return out;
}

/** A path as envd takes it: absolute as is, relative under the user's home (`/` without one). */
export function resolvePath(path: string, account: Account | null): string {
  if (path.startsWith('/')) return path;
  const home = account?.home ?? '/';
  return `${home.replace(/\/+$/, '')}/${path}`;
}
