/**
 * `sbx config lint`: security and consistency checks on a loaded config (spec 5.1, 5.2).
 * Findings name keys, never values, so they are safe to print.
 */
import { hostname as osHostname } from 'node:os';
import { tryParseDuration } from '../shared/duration.js';
import { advertiseUrl, dsnHost, isLoopbackHost } from './advertise.js';
import type { SbxConfig } from './types.js';

export interface LintFinding {
  level: 'fail' | 'warn';
  key: string;
  message: string;
  fix: string;
}

export interface LintOptions {
  /** Production mode turns the exposure findings (auth off, open CORS, unverified TLS, weak keys) into failures. */
  production: boolean;
}

export const MIN_KEY_BYTES = 32;
const GENERATE = 'generate one with `openssl rand -hex 32` and load it from a file (the `_file` key)';

const set = (v: string | undefined): v is string => typeof v === 'string' && v !== '';
const ms = (d: string) => tryParseDuration(d) ?? 0;

/** Lints a loaded config; production mode fails what is only a warning on a dev box. */
export function lintConfig(config: SbxConfig, opts: LintOptions): LintFinding[] {
  const out: LintFinding[] = [];
  const lint: Lint = {
    config,
    production: opts.production === true,
    serious: opts.production ? 'fail' : 'warn',
    add: (level, key, message, fix) => out.push({ level, key, message, fix }),
  };
  for (const rules of [lintAuth, lintKeys, lintCors, lintWorkerAuth, lintDurations, lintCustomHttp]) rules(lint);
  lintReplicas(config, lint.add);
  return out;
}

/** What each group of rules gets: the config, the mode, and where findings go. */
interface Lint {
  config: SbxConfig;
  production: boolean;
  serious: LintFinding['level'];
  add(level: LintFinding['level'], key: string, message: string, fix: string): void;
}

/** Auth off, and the surfaces an open server exposes. */
function lintAuth(l: Lint): void {
  const { config, add, serious } = l;
  const { auth, server } = config;
  if (!auth.enabled && set(auth.api_key)) {
    // Loading turns auth on when a key is set and auth.enabled is not, so this false is explicit.
    add(
      serious,
      'auth.enabled',
      'auth.enabled is false although auth.api_key is set: the key is ignored and anyone who can reach the API ' +
        'can create sandboxes and run commands',
      'remove auth.enabled: false (a configured key turns auth on), or remove the key',
    );
  } else if (!auth.enabled) {
    add(
      serious,
      'auth.enabled',
      `auth is disabled: anyone who can reach the API can create sandboxes and run commands; ${describeGuard(config)}`,
      'set auth.api_key_file (or SVC_AUTH_API_KEY_FILE): a configured key turns auth on',
    );
  }

  if (l.production && server.ui && !auth.enabled) {
    // The dashboard holds no data, but on an open server it is a ready-made console for anyone who
    // reaches it; on a dev box (loopback, dev-box guard) it is the point, so only production fails it.
    add(
      'fail',
      'server.ui',
      'server.ui is on while auth is off: anyone who reaches the server gets a dashboard that creates sandboxes and runs commands',
      'turn auth on (auth.api_key_file), or set server.ui: false',
    );
  }
  if (l.production && server.mcp && !auth.enabled) {
    add(
      'fail',
      'server.mcp',
      'server.mcp is on while auth is off: anyone who reaches the server can drive sandboxes through /mcp',
      'turn auth on (auth.api_key_file), or set server.mcp: false',
    );
  }
  if (l.production && server.e2b && !auth.enabled) {
    add(
      'fail',
      'server.e2b',
      "server.e2b is on while auth is off: anyone who reaches the server can drive sandboxes through E2B's API at /e2b",
      'turn auth on (auth.api_key_file), or set server.e2b: false',
    );
  }
}

/** Key lengths and an admin key that is the API key. */
function lintKeys(l: Lint): void {
  const { config, add, serious } = l;
  const { auth } = config;
  const keys: [string, string | undefined][] = [
    ['auth.api_key', auth.api_key],
    ['auth.admin_api_key', auth.admin_api_key],
    ['auth.worker_token', auth.worker_token],
    ['auth.worker_signing_key', auth.worker_signing_key],
    ...Object.keys(auth.worker_tokens)
      .sort()
      .map((id): [string, string] => [`auth.worker_tokens.${id}`, auth.worker_tokens[id]!]),
    ...auth.worker_signing_keys.map((k, i): [string, string] => [`auth.worker_signing_keys[${i}]`, k]),
  ];
  for (const [key, value] of keys) {
    if (set(value) && Buffer.byteLength(value, 'utf8') < MIN_KEY_BYTES) {
      add(serious, key, `${key} is shorter than ${MIN_KEY_BYTES} bytes`, GENERATE);
    }
  }

  if (set(auth.admin_api_key) && auth.admin_api_key === auth.api_key) {
    add(
      serious,
      'auth.admin_api_key',
      'auth.admin_api_key equals auth.api_key, so every API client is also an admin',
      'set a different, separately distributed admin key',
    );
  }
}

/** Browser origins (spec 5.1 rule 5). */
function lintCors(l: Lint): void {
  const { config, add, serious } = l;
  const { auth, server } = config;
  // Spec 5.1 rule 5 fails both in production, for opposite reasons: "*" opens the API to every web
  // page, while an empty list makes the server refuse every origin (no deliberate browser access).
  const origins = server.cors_allowed_origins;
  const listOrigins = 'list the exact origins that need browser access, e.g. https://app.example.com';
  if (origins.some((o) => o.trim() === 'null')) {
    add(
      'fail',
      'server.cors_allowed_origins',
      'server.cors_allowed_origins contains "null": sandboxed iframes, file: pages and redirects all send ' +
        'Origin: null, so it trusts any of them',
      'remove "null" from the list; list exact origins such as https://app.example.com',
    );
  }
  const odd = origins.filter((o) => !['*', 'null'].includes(o.trim()) && !isOrigin(o.trim()));
  if (odd.length > 0) {
    add(
      'warn',
      'server.cors_allowed_origins',
      `server.cors_allowed_origins has ${odd.length} entr${odd.length === 1 ? 'y' : 'ies'} that never match a ` +
        `browser origin (${odd.map((o) => JSON.stringify(o)).join(', ')})`,
      'write each entry as scheme://host[:port] with no path, e.g. https://app.example.com',
    );
  }
  if (origins.some((o) => o.trim() === '*')) {
    const guarded = auth.enabled
      ? 'any web page may call the API from a browser'
      : 'any web page may call the API from a browser once auth is on (while auth is off the dev-box guard ignores the wildcard)';
    add(serious, 'server.cors_allowed_origins', `server.cors_allowed_origins contains the wildcard "*": ${guarded}`, listOrigins);
  } else if (origins.length === 0) {
    add(
      serious,
      'server.cors_allowed_origins',
      'server.cors_allowed_origins is empty: the server refuses every origin, so no web page can call the API ' +
        'from a browser (preflights get 403)',
      `${listOrigins}; production requires an explicit list`,
    );
  }
}

/** Worker credentials: TLS verification, shared tokens beside signed ones, rotation keys. */
function lintWorkerAuth(l: Lint): void {
  const { config, add, serious } = l;
  const { auth } = config;
  if (config.worker.rpc_tls.insecure_skip_verify) {
    add(
      serious,
      'worker.rpc_tls.insecure_skip_verify',
      'worker RPC accepts any TLS certificate, so a man in the middle can impersonate a worker',
      'set worker.rpc_tls.ca_file to the CA that signed the worker certificates and insecure_skip_verify: false',
    );
  }

  const signing = set(auth.worker_signing_key) || auth.worker_signing_keys.length > 0;
  if (set(auth.worker_token) && signing) {
    add(
      'warn',
      'auth.worker_token',
      'a shared worker token is still accepted beside signed worker tokens',
      'remove auth.worker_token once every worker uses signed tokens',
    );
  }
  if (set(auth.worker_signing_key) && auth.worker_signing_keys.includes(auth.worker_signing_key)) {
    add(
      'warn',
      'auth.worker_signing_keys',
      'the active auth.worker_signing_key is repeated in the rotation list',
      'keep only previous keys in auth.worker_signing_keys',
    );
  }
  // Secrets (DESIGN §15): a key the server would refuse at start.
  if (set(auth.secrets_key) && auth.secrets_key!.trim().length < 32)
    add(
      'fail',
      'auth.secrets_key',
      'auth.secrets_key is shorter than 32 characters: the server refuses to start',
      'use `openssl rand -hex 32`',
    );
  const seen = new Set<string>();
  auth.worker_signing_keys.forEach((k, i) => {
    if (seen.has(k))
      add(
        'warn',
        `auth.worker_signing_keys[${i}]`,
        `auth.worker_signing_keys[${i}] repeats an earlier rotation key`,
        'remove the duplicate entry',
      );
    seen.add(k);
  });
}

/** Retention and default durations that contradict their limits. */
function lintDurations(l: Lint): void {
  const { config, add } = l;
  const { auth, defaults } = config;
  if (!set(auth.admin_audit_retention) || ms(auth.admin_audit_retention) === 0) {
    add(
      'warn',
      'auth.admin_audit_retention',
      'no admin audit retention is set, so audit history is never pruned',
      'set auth.admin_audit_retention, e.g. 720h (30 days)',
    );
  }

  if (ms(defaults.max_ttl) > 0 && ms(defaults.ttl) > ms(defaults.max_ttl)) {
    add(
      'warn',
      'defaults.ttl',
      `defaults.ttl (${defaults.ttl}) is above defaults.max_ttl (${defaults.max_ttl}), so a spawn without a ttl is rejected`,
      'lower defaults.ttl or raise defaults.max_ttl',
    );
  }
  if (ms(defaults.max_exec_timeout) > 0 && ms(defaults.default_exec_timeout) > ms(defaults.max_exec_timeout)) {
    add(
      'warn',
      'defaults.default_exec_timeout',
      `defaults.default_exec_timeout (${defaults.default_exec_timeout}) is above defaults.max_exec_timeout (${defaults.max_exec_timeout})`,
      'lower defaults.default_exec_timeout or raise defaults.max_exec_timeout',
    );
  }
}

/** The custom HTTP provider: a backend and its key. */
function lintCustomHttp(l: Lint): void {
  const { config, add, serious } = l;
  const ch = config.providers.custom_http;
  if (
    ch.enabled === true ||
    (ch.enabled !== false && (config.providers.default === 'custom_http' || config.providers.default === 'custom-http'))
  ) {
    if (!set(ch.base_url)) {
      add(
        'fail',
        'providers.custom_http.base_url',
        'the custom HTTP provider is enabled but names no backend',
        'set providers.custom_http.base_url to the backend of the contract (docs/providers/custom-http.md)',
      );
    } else if (!set(ch.api_key)) {
      add(
        serious,
        'providers.custom_http.api_key',
        'the custom HTTP provider sends no X-API-Key: anyone who reaches the backend can run commands through it',
        'set providers.custom_http.api_key_file (the backend checks the key)',
      );
    }
  }
}

/**
 * Replicas that run sandboxes (DESIGN §7): the others reach this one's `/rpc` at the advertised
 * URL, so a loopback one with the database on another host can only be a mistake, and plain http
 * between hosts carries sandbox traffic in the clear.
 */
function lintReplicas(config: SbxConfig, add: (level: LintFinding['level'], key: string, message: string, fix: string) => void): void {
  if (config.database.driver !== 'postgres' || config.server.local_worker === false) return;
  const db = dsnHost(config.database.dsn);
  if (db === null || isLoopbackHost(db) || db.startsWith('/')) return;
  let url: URL;
  try {
    url = new URL(advertiseUrl(config));
  } catch {
    add('fail', 'server.advertise_url', 'server.advertise_url is not a URL', 'set server.advertise_url to http(s)://HOST:PORT');
    return;
  }
  if (isLoopbackHost(url.hostname)) {
    add(
      'fail',
      'server.advertise_url',
      'this replica advertises a loopback address while the database is on another host: replicas on other ' +
        'machines cannot reach its sandboxes',
      'set server.advertise_url (or server.host) to an address the other replicas reach',
    );
  } else if (url.protocol === 'http:') {
    add(
      'warn',
      'server.advertise_url',
      'replicas reach each other over plain http: forwarded sandbox traffic (exec, files) crosses the network unencrypted',
      'put the replicas on a private network, or behind TLS and set server.advertise_url to https://…',
    );
  }
}

/** An http(s) origin as browsers send it: scheme://host[:port], nothing after. */
function isOrigin(value: string): boolean {
  try {
    const u = new URL(value);
    return (
      (u.protocol === 'http:' || u.protocol === 'https:') &&
      u.username === '' &&
      u.password === '' &&
      u.pathname === '/' &&
      u.search === '' &&
      u.hash === ''
    );
  } catch {
    return false;
  }
}

/**
 * What the dev-box guard admits while auth is off (DESIGN.md §3), in one line for `sbx serve`'s
 * start and `sbx config lint`. Names and origins only; no secrets.
 */
export function describeGuard(config: Pick<SbxConfig, 'server'>, hostname = osHostname()): string {
  const { server } = config;
  const listed = server.cors_allowed_origins.map((o) => o.trim()).filter((o) => o !== 'null' && isOrigin(o));
  const origins = ['localhost', '127.0.0.0/8', '[::1]', "the server's own origin", ...listed].join(', ');
  const domain = server.preview_domain.trim().replace(/^\.+/, '').replace(/\.$/, '');
  const hosts = ['IP addresses', 'localhost', hostname.toLowerCase(), ...server.allowed_hosts, ...(domain ? [`*.${domain}`] : [])]
    .filter((h) => h !== '')
    .join(', ');
  return `dev-box guard on: browser origins limited to ${origins}; Host limited to ${hosts} (more names: server.allowed_hosts)`;
}
