import { SbxError } from '../../../core/errors.js';

/** Removes the DSN, its password and any `scheme://user:password@` credentials from text. */
export function makeRedactor(dsn: string): (text: string) => string {
  const secrets = new Set<string>();
  if (dsn) secrets.add(dsn);
  try {
    const url = new URL(dsn);
    if (url.password) {
      secrets.add(url.password);
      secrets.add(decodeURIComponent(url.password));
    }
  } catch {
    // Not a URL: maybe the key=value form, handled below.
  }
  for (const m of dsn.matchAll(/password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)/gi)) {
    const raw = m[1]!;
    secrets.add(raw);
    if (raw.startsWith("'")) secrets.add(raw.slice(1, -1));
  }
  // Longest first so a secret containing another is removed whole.
  const ordered = [...secrets].filter((s) => s.length > 0).sort((a, b) => b.length - a.length);
  return (text: string) => {
    let out = text.replace(/(\w+:\/\/[^:/@\s]*):[^@\s]*@/g, '$1:***@');
    for (const s of ordered) out = out.split(s).join('***');
    return out;
  };
}

const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE', 'EHOSTUNREACH']);

function isConnectionError(err: { code?: unknown; message?: unknown }): boolean {
  const code = typeof err.code === 'string' ? err.code : '';
  if (UNAVAILABLE_NODE_CODES.has(code)) return true;
  // SQLSTATE classes 08 (connection), 53 (resources), 57P (shutdown), 28 (authentication).
  if (/^(08|53|57P|28)/.test(code)) return true;
  const message = typeof err.message === 'string' ? err.message : '';
  return /connection terminated|timeout exceeded when trying to connect|connection refused/i.test(message);
}

/** Translates a driver error into an SbxError whose message cannot carry the DSN or password. */
export function storeError(err: unknown, redact: (text: string) => string, context = 'postgres store', code?: 'unavailable'): SbxError {
  if (err instanceof SbxError) return err;
  const e = (typeof err === 'object' && err !== null ? err : { message: String(err) }) as {
    code?: unknown;
    message?: unknown;
  };
  const message = redact(typeof e.message === 'string' && e.message ? e.message : String(err));
  return new SbxError(code ?? (isConnectionError(e) ? 'unavailable' : 'internal'), `${context}: ${message}`);
}
