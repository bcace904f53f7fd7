/**
 * `sbx worker token mint|inspect|verify`: local only, through `main(argv)` so option parsing,
 * defaults and exit codes are the real ones. Tokens are checked by the same core code a server uses.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AUD_CONTROL_PLANE, AUD_RPC, WORKER_SCOPES } from '../../src/core/auth/worker-claims.js';
import { signWorkerClaims, verifyWorkerToken } from '../../src/core/auth/worker-credentials.js';
import { workerTokenCommand } from '../../src/transports/cli/commands/worker-token.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { tempDir } from '../helpers/tmp.js';
import { emptyHome, runSbx } from './run-sbx.js';

const KEY = 'worker-signing-key-5d1f8a3c7e9b2d4f6a8c0e1b3d5f7a9c';
const OTHER = 'another-signing-key-0a2c4e6f8b1d3f5a7c9e0b2d4f6a8c1e';
const env = { SBX_WORKER_SIGNING_KEY: KEY, HOME: emptyHome };
const sbx = (argv: string[], e: Record<string, string> = env, stdin?: string) => runSbx(['worker', 'token', ...argv], { env: e, stdin });
const claimsOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString('utf8')) as Record<string, unknown>;
const now = () => Math.floor(Date.now() / 1000);

/**
 * Runs a token subcommand's handler directly. `--signing-key-file` and `-c` are also options of the
 * parent `sbx worker`, which takes them from the command line before `mint`/`verify` sees them, so
 * those two are tested here with the parsed options handed over as main() would.
 */
async function handler(name: string, opts: Record<string, unknown>, e: Record<string, string> = { HOME: emptyHome }) {
  const cli = fakeCli({ url: 'http://127.0.0.1:9', home: emptyHome });
  (cli.ctx as { env: Record<string, string> }).env = e;
  const code = await runCommand(workerTokenCommand.subcommands!.find((c) => c.name === name)!, cli.ctx, opts);
  await cli.close();
  return { code, stdout: cli.stdout(), stderr: cli.stderr() };
}

async function mint(argv: string[], e: Record<string, string> = env): Promise<string> {
  const r = await sbx(['mint', ...argv], e);
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  return r.stdout.trim();
}

describe('sbx worker token mint', () => {
  it('defaults: audience worker:control-plane, every worker scope, 5 minutes, a random jti', async () => {
    const token = await mint(['--worker-id', 'w1']);
    expect(token).toMatch(/^svc-worker-v1\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
    const c = claimsOf(token);
    expect(c).toMatchObject({ worker_id: 'w1', aud: AUD_CONTROL_PLANE, scopes: [...WORKER_SCOPES] });
    expect(c.jti).toMatch(/^[0-9a-f]{24}$/);
    expect((c.exp as number) - (c.iat as number)).toBe(300);
    expect(Math.abs((c.iat as number) - now())).toBeLessThanOrEqual(2);
    expect(claimsOf(await mint(['--worker-id', 'w1'])).jti).not.toBe(c.jti);
    // The token verifies with the server's own check.
    expect(
      verifyWorkerToken(token, { keys: [KEY], audience: AUD_CONTROL_PLANE, workerId: 'w1', now: new Date(), revoked: [] }).scopes,
    ).toEqual([...WORKER_SCOPES]);
  });

  it('takes audience, scopes, ttl; the key from a file or the config', async () => {
    const dir = tempDir('sbx-wtok-');
    const keyFile = join(dir, 'key.txt');
    writeFileSync(keyFile, `${OTHER}\n`);
    const m1 = await handler('mint', {
      workerId: 'w2',
      audience: 'worker:rpc',
      scopes: ['worker:exec', 'worker:files'],
      ttl: '15m',
      signingKeyFile: keyFile,
    });
    expect(m1).toMatchObject({ code: 0, stderr: '' });
    const t1 = m1.stdout.trim();
    expect(claimsOf(t1)).toMatchObject({ worker_id: 'w2', aud: AUD_RPC, scopes: ['worker:exec', 'worker:files'] });
    expect((claimsOf(t1).exp as number) - (claimsOf(t1).iat as number)).toBe(900);
    expect(() => verifyWorkerToken(t1, { keys: [KEY], audience: AUD_RPC, workerId: 'w2', now: new Date(), revoked: [] })).toThrow(
      /signature is invalid/,
    );
    expect(verifyWorkerToken(t1, { keys: [OTHER], audience: AUD_RPC, workerId: 'w2', now: new Date(), revoked: [] }).worker_id).toBe('w2');

    const cfg = join(dir, 'sbx.yaml');
    writeFileSync(cfg, `auth:\n  worker_signing_key: ${KEY}\n  worker_signing_keys: ["${OTHER}"]\n`);
    const t2 = (await handler('mint', { workerId: 'w3', audience: AUD_CONTROL_PLANE, ttl: '5m', config: cfg })).stdout.trim();
    expect(
      verifyWorkerToken(t2, { keys: [KEY], audience: AUD_CONTROL_PLANE, workerId: 'w3', now: new Date(), revoked: [] }).worker_id,
    ).toBe('w3');
    // verify with the config accepts the rotation key too.
    const v = await handler('verify', { token: t1, workerId: 'w2', audience: AUD_RPC, config: cfg });
    expect(v).toMatchObject({ code: 0, stderr: '' });
    expect(v.stdout).toMatch(/^valid: worker w2, scopes worker:exec, worker:files, /);
    // The same through SBX_CONFIG on the command line.
    const viaEnv = await sbx(['verify', t1, '--worker-id', 'w2', '--audience', 'worker:rpc'], { HOME: emptyHome, SBX_CONFIG: cfg });
    expect(viaEnv).toMatchObject({ code: 0, stderr: '' });
  });

  it('refuses bad input: no worker id, ttl over 15m, unknown scope, unknown audience, no key', async () => {
    const noId = await sbx(['mint']);
    expect(noId).toMatchObject({ code: 2, stdout: '' });
    expect(noId.stderr).toContain('--worker-id is required');
    const long = await sbx(['mint', '--worker-id', 'w1', '--ttl', '16m']);
    expect(long.code).toBe(2);
    expect(long.stderr).toContain('--ttl must be between 1s and 15m');
    const scope = await sbx(['mint', '--worker-id', 'w1', '--scopes', 'worker:exec,admin']);
    expect(scope.code).toBe(2);
    expect(scope.stderr).toContain('unknown scope admin');
    expect((await sbx(['mint', '--worker-id', 'w1', '--audience', 'user'])).code).toBe(2);
    const noKey = await sbx(['mint', '--worker-id', 'w1'], { HOME: emptyHome });
    expect(noKey.code).not.toBe(0);
    expect(noKey.stdout).toBe('');
    expect(noKey.stderr).toContain('no signing key');
    const missing = await handler('mint', { workerId: 'w1', audience: AUD_CONTROL_PLANE, ttl: '5m', signingKeyFile: '/nonexistent/key' });
    expect(missing.code).not.toBe(0);
    expect(missing.stderr).toContain('cannot read the signing key file /nonexistent/key: ENOENT');
  });
});

describe('sbx worker token inspect', () => {
  it('prints the claims with ISO times and never the signature; reads - from stdin; --json', async () => {
    const token = await mint(['--worker-id', 'w1', '--audience', 'worker:rpc', '--ttl', '2m']);
    const c = claimsOf(token);
    const r = await sbx(['inspect', token]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/worker_id:\s+w1\n/);
    expect(r.stdout).toMatch(new RegExp(`jti:\\s+${c.jti as string}\\n`));
    expect(r.stdout).toMatch(/audience:\s+worker:rpc\n/);
    expect(r.stdout).toMatch(new RegExp(`scopes:\\s+${WORKER_SCOPES.join(', ')}\\n`));
    expect(r.stdout).toContain(`issued:    ${new Date((c.iat as number) * 1000).toISOString()}`);
    expect(r.stdout).toMatch(
      new RegExp(`expires:\\s+${new Date((c.exp as number) * 1000).toISOString().replace(/\./g, '\\.')} \\(expires in (1m 5\\ds|2m 0s)\\)`),
    );
    expect(r.stdout).toMatch(/signature:\s+present \(not verified/);
    expect(r.stdout).not.toContain(token.split('.')[2]!);

    const piped = await sbx(['inspect', '-'], env, `${token}\n`);
    expect(piped).toMatchObject({ code: 0, stdout: r.stdout });
    const json = await runSbx(['worker', 'token', 'inspect', token, '--json'], { env });
    expect(JSON.parse(json.stdout)).toEqual(c);

    const past = signWorkerClaims(KEY, { worker_id: 'w1', jti: 'old', aud: AUD_RPC, iat: now() - 600, exp: now() - 300 });
    expect((await sbx(['inspect', past])).stdout).toMatch(/\(expired 5m \ds ago\)/);
    const garbage = await sbx(['inspect', 'garbage']);
    expect(garbage).toMatchObject({ code: 1, stdout: '' });
    expect(garbage.stderr).toContain('not a signed worker token');
  });
});

describe('sbx worker token verify', () => {
  it('exit 0 for a valid token; exit 1 with the reason for wrong key, audience, worker, expiry', async () => {
    const token = await mint(['--worker-id', 'w1', '--audience', 'worker:rpc', '--scopes', 'worker:exec']);
    const ok = await sbx(['verify', token, '--worker-id', 'w1', '--audience', 'worker:rpc']);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^valid: worker w1, scopes worker:exec, expires \d{4}-\d\d-\d\dT/);

    const bad = async (argv: string[], reason: string, e = env, t = token) => {
      const r = await sbx(['verify', t, ...argv], e);
      expect(r, reason).toMatchObject({ code: 1, stdout: '', stderr: `sbx: invalid: ${reason}\n` });
    };
    await bad(['--worker-id', 'w1', '--audience', 'worker:rpc'], 'worker token signature is invalid', {
      SBX_WORKER_SIGNING_KEY: OTHER,
      HOME: emptyHome,
    });
    await bad(['--worker-id', 'w1'], 'worker token audience is not worker:control-plane');
    await bad(['--worker-id', 'w2', '--audience', 'worker:rpc'], 'the token names another worker than --worker-id');
    const expired = signWorkerClaims(KEY, { worker_id: 'w1', jti: 'e1', aud: AUD_RPC, iat: now() - 900, exp: now() - 120 });
    await bad(['--worker-id', 'w1', '--audience', 'worker:rpc'], 'worker token has expired', env, expired);
    await bad(['--worker-id', 'w1', '--audience', 'worker:rpc'], 'worker token is malformed', env, 'svc-worker-v1.x.y');
    expect((await sbx(['verify', token, '--audience', 'worker:rpc'])).code).toBe(2);
  });
});
