/** What a secret may be (DESIGN.md §15): its name, its value, its hosts. Pure checks; a bad input → 400 naming it. */
import { badRequest } from '../errors.js';
import { MAX_RULES, parseRule } from '../network/rules.js';

export const SECRET_NAME = /^[A-Z_][A-Z0-9_]{0,63}$/;
/** Largest value, in UTF-8 bytes. */
export const MAX_VALUE_BYTES = 64 * 1024;
/** Most secrets one sandbox binds. */
export const MAX_BINDINGS = 64;

/** Variables sbx sets in sandboxes, or whose change breaks them. */
const RESERVED = new Set([
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'SSL_CERT_FILE',
  'NODE_EXTRA_CA_CERTS',
  'REQUESTS_CA_BUNDLE',
  'CURL_CA_BUNDLE',
  'PATH',
  'HOME',
]);

export const NAME_RULE = 'secret names: [A-Z_][A-Z0-9_]{0,63}, not HTTP_PROXY, HTTPS_PROXY, NO_PROXY, the CA variables, PATH, HOME or LD_*';

/** A secret's name, or 400: the pattern, then the names sbx sets or that break sandboxes (any case). */
export function checkSecretName(raw: unknown): string {
  if (typeof raw !== 'string' || !SECRET_NAME.test(raw))
    throw badRequest(`secret name ${JSON.stringify(typeof raw === 'string' ? raw.slice(0, 80) : raw)} is not valid (${NAME_RULE})`);
  const upper = raw.toUpperCase();
  if (RESERVED.has(upper) || upper.startsWith('LD_'))
    throw badRequest(`secret name ${raw} is reserved: sbx sets it in sandboxes or changing it breaks them (${NAME_RULE})`);
  return raw;
}

/**
 * A value: a string of at most 64 KiB (UTF-8), not empty, without CR, LF or NUL (it is sent in HTTP
 * header values). The message never quotes it.
 */
export function checkSecretValue(raw: unknown): string {
  if (typeof raw !== 'string') throw badRequest('value must be a string');
  if (raw.length === 0) throw badRequest('value must not be empty');
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > MAX_VALUE_BYTES) throw badRequest(`value is ${bytes} bytes; at most ${MAX_VALUE_BYTES} (64 KiB)`);
  if (/[\r\n\0]/.test(raw)) throw badRequest('value must not contain CR, LF or NUL: it is sent in HTTP header values');
  return raw;
}

/** The hosts a value may go to: 1 to 64 egress rules (§10 syntax), canonical, without repeats. */
export function checkSecretHosts(raw: unknown): string[] {
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest('hosts must be a non-empty array of egress rules (e.g. "api.example.com")');
  if (raw.length > MAX_RULES) throw badRequest(`hosts has ${raw.length} rules; at most ${MAX_RULES}`);
  const out: string[] = [];
  for (const r of raw) {
    const text = parseRule(r).text;
    if (!out.includes(text)) out.push(text);
  }
  return out;
}

/** The names a spawn or template binds: an array of valid names, at most 64, repeats dropped. */
export function checkBindingNames(raw: unknown): string[] {
  if (!Array.isArray(raw)) throw badRequest('secrets must be an array of secret names');
  if (raw.length > MAX_BINDINGS) throw badRequest(`secrets has ${raw.length} names; at most ${MAX_BINDINGS}`);
  const out: string[] = [];
  for (const n of raw) {
    const name = checkSecretName(n);
    if (!out.includes(name)) out.push(name);
  }
  return out;
}
