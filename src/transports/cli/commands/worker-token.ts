/**
 * `sbx worker token mint|inspect|verify`: signed worker tokens (spec 5.2) on this machine, no
 * server needed. The signing key comes from --signing-key-file, SBX_WORKER_SIGNING_KEY, or the
 * config's auth.worker_signing_key[_file]; it is never printed.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { AUD_CONTROL_PLANE, AUD_RPC, MAX_TOKEN_LIFETIME_S, WORKER_SCOPES } from '../../../core/auth/worker-claims.js';
import { parseDuration } from '../../../core/duration.js';
import type { CliContext } from '../context.js';
import { ExitError, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { CommandSpec } from '../spec.js';

const AUDIENCES = [AUD_CONTROL_PLANE, AUD_RPC] as const;

/**
 * The signing keys, active one first: the file, else SBX_WORKER_SIGNING_KEY, else the config's
 * auth.worker_signing_key(_file) followed by its rotation keys (verify accepts any of them).
 */
async function signingKeys(ctx: CliContext, file: string | undefined, config: string | undefined): Promise<string[]> {
  if (file) {
    let key = '';
    try {
      key = readFileSync(file, 'utf8').trim();
    } catch (err) {
      throw new ExitError(EXIT.config, `cannot read the signing key file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
    if (!key) throw new ExitError(EXIT.config, `the signing key file ${file} is empty`);
    return [key];
  }
  const fromEnv = ctx.env.SBX_WORKER_SIGNING_KEY?.trim();
  if (fromEnv) return [fromEnv];
  const { loadConfig } = await import('../../../config/index.js');
  const { config: c } = await loadConfig({ file: config, env: ctx.env, cwd: ctx.cwd, home: ctx.home });
  const key = c.auth.worker_signing_key?.trim() ?? '';
  if (!key)
    throw new ExitError(
      EXIT.config,
      'no signing key: pass --signing-key-file, set SBX_WORKER_SIGNING_KEY, or auth.worker_signing_key in the config',
    );
  return [key, ...c.auth.worker_signing_keys.filter((k) => k !== '' && k !== key)];
}

function readToken(ctx: CliContext, token: string): Promise<string> | string {
  if (token !== '-') return token.trim();
  return (async () => {
    let text = '';
    for await (const c of ctx.stdin.stream) text += Buffer.isBuffer(c) ? c.toString('utf8') : String(c);
    return text.trim();
  })();
}

const iso = (s: unknown) => (typeof s === 'number' ? new Date(s * 1000).toISOString() : '-');

/** `1m 59s`, `12s`: a short span for "expires in …". */
function span(ms: number): string {
  const s = Math.round(Math.abs(ms) / 1000);
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}m ${s % 60}s` : `${s}s`;
}

const keyOptions = [
  {
    flags: '--signing-key-file <file>',
    description: 'HMAC signing key (else SBX_WORKER_SIGNING_KEY, else auth.worker_signing_key)',
    complete: 'file' as const,
  },
  { flags: '-c, --config <file>', description: 'config file to read auth.worker_signing_key from', complete: 'file' as const },
];

const mint: CommandSpec = {
  name: 'mint',
  summary: 'mint a signed worker token',
  offline: true,
  options: [
    { flags: '--worker-id <id>', description: 'the worker the token names (required)' },
    {
      flags: '--audience <aud>',
      description: 'worker:control-plane (a worker calling its control plane) or worker:rpc',
      choices: AUDIENCES,
      default: AUD_CONTROL_PLANE,
    },
    { flags: '--scopes <list>', description: `comma-separated scopes (default all: ${WORKER_SCOPES.join(', ')})`, kind: 'list' },
    { flags: '--ttl <duration>', description: 'lifetime (default 5m, at most 15m)', kind: 'duration', default: '5m' },
    ...keyOptions,
  ],
  examples: ['sbx worker token mint --worker-id w1 --signing-key-file key.txt'],
  async run(ctx, opts: { workerId?: string; audience: string; scopes?: string[]; ttl: string; signingKeyFile?: string; config?: string }) {
    if (!opts.workerId) throw new UsageError('--worker-id is required');
    const ttlS = Math.floor(parseDuration(opts.ttl, 'ttl') / 1000);
    if (ttlS <= 0 || ttlS > MAX_TOKEN_LIFETIME_S) throw new UsageError(`--ttl must be between 1s and ${MAX_TOKEN_LIFETIME_S / 60}m`);
    const unknown = (opts.scopes ?? []).filter((s) => !(WORKER_SCOPES as readonly string[]).includes(s));
    if (unknown.length > 0) throw new UsageError(`unknown scope ${unknown.join(', ')} (known: ${WORKER_SCOPES.join(', ')})`);
    const [key] = await signingKeys(ctx, opts.signingKeyFile, opts.config);
    const { signWorkerClaims } = await import('../../../core/auth/worker-credentials.js');
    const iat = Math.floor(Date.now() / 1000);
    const scopes = opts.scopes && opts.scopes.length > 0 ? opts.scopes : [...WORKER_SCOPES];
    ctx.out.line(
      signWorkerClaims(key!, {
        worker_id: opts.workerId,
        jti: randomBytes(12).toString('hex'),
        aud: opts.audience,
        scopes,
        iat,
        exp: iat + ttlS,
      }),
    );
    return 0;
  },
};

const inspect: CommandSpec = {
  name: 'inspect',
  summary: 'show the claims of a worker token (not verified)',
  offline: true,
  args: [{ name: 'token', description: 'the token, or - for stdin', required: true }],
  async run(ctx, opts: { token: string }) {
    const token = await readToken(ctx, opts.token);
    const parts = token.split('.');
    let claims: Record<string, unknown>;
    try {
      if (parts.length !== 3 || parts[0] !== 'svc-worker-v1') throw new Error('shape');
      claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
      if (!claims || typeof claims !== 'object') throw new Error('claims');
    } catch {
      throw new ExitError(EXIT.failure, 'not a signed worker token (svc-worker-v1.<payload>.<signature>)');
    }
    if (ctx.out.json) {
      ctx.out.printJson(claims);
      return 0;
    }
    const exp = typeof claims.exp === 'number' ? claims.exp * 1000 - Date.now() : NaN;
    ctx.out.fields([
      ['worker_id', String(claims.worker_id ?? '-')],
      ['jti', String(claims.jti ?? '-')],
      ['audience', Array.isArray(claims.aud) ? claims.aud.join(', ') : String(claims.aud ?? '-')],
      ['scopes', Array.isArray(claims.scopes) ? claims.scopes.join(', ') : 'all (none listed)'],
      ['issued', iso(claims.iat)],
      ...(claims.nbf !== undefined ? [['not before', iso(claims.nbf)] as const] : []),
      [
        'expires',
        `${iso(claims.exp)}${Number.isFinite(exp) ? (exp > 0 ? ` (expires in ${span(exp)})` : ` (expired ${span(exp)} ago)`) : ''}`,
      ],
      ['signature', 'present (not verified; use sbx worker token verify)'],
    ]);
    return 0;
  },
};

const verify: CommandSpec = {
  name: 'verify',
  summary: 'verify a worker token against a signing key',
  offline: true,
  args: [{ name: 'token', description: 'the token, or - for stdin', required: true }],
  options: [
    { flags: '--worker-id <id>', description: 'the worker id the token must name (required)' },
    { flags: '--audience <aud>', description: 'the audience it must carry', choices: AUDIENCES, default: AUD_CONTROL_PLANE },
    ...keyOptions,
  ],
  async run(ctx, opts: { token: string; workerId?: string; audience: string; signingKeyFile?: string; config?: string }) {
    if (!opts.workerId) throw new UsageError('--worker-id is required');
    const token = await readToken(ctx, opts.token);
    const keys = await signingKeys(ctx, opts.signingKeyFile, opts.config);
    const { verifyWorkerToken } = await import('../../../core/auth/worker-credentials.js');
    try {
      const id = verifyWorkerToken(token, { keys, audience: opts.audience, workerId: opts.workerId, now: new Date(), revoked: [] });
      ctx.out.line(`valid: worker ${id.worker_id}, scopes ${id.scopes.join(', ') || 'none'}, expires ${id.expires ?? 'never'}`);
      return 0;
    } catch (err) {
      // The core check speaks of the request header; here the id came from --worker-id.
      const reason = (err as Error).message.replace(
        'X-Worker-ID does not match the worker token',
        'the token names another worker than --worker-id',
      );
      throw new ExitError(EXIT.failure, `invalid: ${reason}`);
    }
  },
};

export const workerTokenCommand: CommandSpec = {
  name: 'token',
  summary: 'mint, inspect or verify signed worker tokens',
  offline: true,
  subcommands: [mint, inspect, verify],
};
