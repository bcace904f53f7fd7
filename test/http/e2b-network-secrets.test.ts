import { ALL_TRAFFIC, Sandbox, type SandboxOpts, Secret, SecretNotFoundError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Provider, SpawnSpec } from '../../src/core/ports/index.js';
import { envdSdkFor, type EnvdSdk } from '../helpers/e2b-sdk.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * E2B's network options and `Secret` (DESIGN.md §10, §14, §15), driven by E2B's own SDK against a
 * real server on a real port. The mock provider cannot enforce egress, so it gets the stand-in
 * enforcer test/http/egress.test.ts uses (test/docker/egress.test.ts proves enforcement itself):
 * what is checked here is what the SDK's options become — network, egress lists, secret bindings —
 * and what is refused with E2B's 400.
 */
const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';
const VALUE = 'sk-live-the-value-itself-0123456789';

describe('E2B network options and secrets', () => {
  let srv: TestServer;
  let sdk: EnvdSdk;
  const requested: string[] = [];
  const changed: string[] = [];
  const native = async (path: string) => (await call(srv.url, 'GET', path, undefined, { 'x-api-key': KEY })).body;
  const live = async () => ((await call(srv.url, 'GET', '/api/v1/sandboxes')).body as unknown[]).length;

  beforeAll(async () => {
    srv = await startTestServer();
    sdk = envdSdkFor(srv.url, requested, KEY);
    const mock = srv.plane.deps.providers.get('mock') as Provider & { egress?: Provider['egress'] };
    // Read past the metrics proxy, which keeps the first method it hands out.
    const spawn = (Object.getOwnPropertyDescriptor(mock, 'spawn')!.value as Provider['spawn']).bind(mock);
    Object.assign(mock, {
      egress: { unavailable: () => null, changed: (id: string) => changed.push(id) },
      spawn: async (spec: SpawnSpec, signal?: AbortSignal) => {
        const { network, ...rest } = spec;
        const r = await spawn(rest, signal);
        return { ...r, network: network ?? r.network };
      },
    });
  });
  afterAll(async () => {
    await srv?.close();
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b`)).toBe(true);
  });

  it('deny ALL_TRAFFIC + allowOut → filtered with allowOut as the allow list; updateNetwork replaces it', async () => {
    const sbx = await Sandbox.create({
      ...sdk,
      network: { denyOut: [ALL_TRAFFIC, '10.0.0.0/8'], allowOut: ['PyPI.org.', '*.npmjs.org', '1.1.1.1', '8.8.8.0/24'] },
    });
    const rec = await native(`/api/v1/sandboxes/${sbx.sandboxId}`);
    expect(rec.network).toBe('filtered');
    // E2B's allow rules win over its deny rules: the other deny entries add nothing to "deny everything".
    expect(rec.egress).toEqual({ allow: ['pypi.org', '*.npmjs.org', '1.1.1.1', '8.8.8.0/24'], deny: [] });

    // getInfo words it as E2B does, to the owner.
    const info = await Sandbox.getInfo(sbx.sandboxId, sdk);
    expect(info.network).toMatchObject({ allowOut: ['pypi.org', '*.npmjs.org', '1.1.1.1', '8.8.8.0/24'], denyOut: [ALL_TRAFFIC] });
    await sbx.updateNetwork({ denyOut: [ALL_TRAFFIC], allowOut: ['example.com'] });
    expect((await native(`/api/v1/sandboxes/${sbx.sandboxId}`)).egress).toEqual({ allow: ['example.com'], deny: [] });
    expect(changed).toContain(sbx.sandboxId);
    // Opening a filtered sandbox to everything cannot be done: E2B's 400, lists unchanged.
    await expect(sbx.updateNetwork({ allowOut: ['example.org'] })).rejects.toThrow(/open the network to everything/);
    expect((await native(`/api/v1/sandboxes/${sbx.sandboxId}`)).egress).toEqual({ allow: ['example.com'], deny: [] });
    await sbx.kill();
  });

  it('allowInternetAccess false → none, or filtered with allowOut; allowOut alone → the default network', async () => {
    const closed = await Sandbox.create({ ...sdk, allowInternetAccess: false });
    expect((await native(`/api/v1/sandboxes/${closed.sandboxId}`)).network).toBe('none');
    expect((await Sandbox.getInfo(closed.sandboxId, sdk)).allowInternetAccess).toBe(false);
    const someOut = await Sandbox.create({ ...sdk, allowInternetAccess: false, network: { allowOut: ['api.example.com'] } });
    const rec = await native(`/api/v1/sandboxes/${someOut.sandboxId}`);
    expect(rec.network).toBe('filtered');
    expect(rec.egress).toEqual({ allow: ['api.example.com'], deny: [] });
    const denyAllNoAllow = await Sandbox.create({ ...sdk, network: { denyOut: [ALL_TRAFFIC] } });
    expect((await native(`/api/v1/sandboxes/${denyAllNoAllow.sandboxId}`)).network).toBe('none');
    // E2B's allow list over an open network restricts nothing: the server's default network.
    const open = await Sandbox.create({ ...sdk, network: { allowOut: ['api.example.com'] } });
    const openRec = await native(`/api/v1/sandboxes/${open.sandboxId}`);
    expect(openRec.network).not.toBe('filtered');
    expect(openRec.egress).toBeUndefined();
    for (const s of [closed, someOut, denyAllNoAllow, open]) await s.kill();
  });

  it('what cannot map is E2B’s 400 with its reason, nothing created', async () => {
    const before = await live();
    const refused: Array<[SandboxOpts, RegExp]> = [
      [{ network: { denyOut: ['10.0.0.0/8'] } }, /denyOut without ALL_TRAFFIC is not supported/],
      [{ network: { maskRequestHost: 'localhost:${PORT}' } }, /maskRequestHost is not supported/],
      [{ network: { allowPublicTraffic: false } }, /allowPublicTraffic: false is not supported/],
      [{ network: { httpsPorts: [8443] } }, /httpsPorts is not supported/],
      [{ network: { egressProxy: { address: 'proxy.example:1080' } } }, /egressProxy is not supported/],
      [{ network: { denyOut: [ALL_TRAFFIC], allowOut: ['a.*.com'] } }, /"a\.\*\.com".*wildcard/],
      [
        { network: { denyOut: [ALL_TRAFFIC], rules: { 'api.example.com': [{ transform: { headers: { 'x-key': VALUE } } }] } } },
        /literal value.*Secret\.fill/,
      ],
    ];
    for (const [opts, message] of refused) {
      const err = await Sandbox.create({ ...sdk, ...opts }).catch((e: unknown) => e);
      expect(err, JSON.stringify(opts)).toBeInstanceOf(Error);
      expect(String((err as Error).message)).toMatch(message);
      expect(String((err as Error).message)).not.toContain(VALUE);
    }
    // The raw wire: E2B's error body {code: 400, message}.
    const raw = await fetch(`${srv.url}/e2b/v2/sandboxes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEY },
      body: JSON.stringify({ templateID: 'base', network: { maskRequestHost: 'x' } }),
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toEqual({ code: 400, message: expect.stringMatching(/maskRequestHost/) });
    expect(await live()).toBe(before);
  });

  it('Secret: create with hosts in metadata, getInfo, list, exists, update, destroy; the value never answered', async () => {
    const made = await Secret.create('OPENAI_KEY', VALUE, { ...sdk, metadata: { hosts: 'api.openai.com, *.openai.azure.com' } });
    expect(made).toMatchObject({ secretId: 'OPENAI_KEY', name: 'OPENAI_KEY', version: 1 });
    expect(made.metadata).toEqual({ hosts: 'api.openai.com,*.openai.azure.com' });
    expect(made.createdAt).toBeInstanceOf(Date);
    // The same secret on the native API, in the same owner's namespace.
    const nat = await native('/api/v1/secrets/OPENAI_KEY');
    expect(nat).toMatchObject({ name: 'OPENAI_KEY', hosts: ['api.openai.com', '*.openai.azure.com'] });
    expect((await Secret.getInfo('OPENAI_KEY', sdk)).name).toBe('OPENAI_KEY');
    expect(await Secret.exists('OPENAI_KEY', sdk)).toBe(true);
    expect(await Secret.exists('NOPE', sdk)).toBe(false);
    await expect(Secret.getInfo('NOPE', sdk)).rejects.toBeInstanceOf(SecretNotFoundError);
    await Secret.create('OTHER', 'v2-value', { ...sdk, metadata: { hosts: 'example.com' } });
    const pager = Secret.list({ ...sdk, limit: 1 });
    const names: string[] = [];
    while (pager.hasNext) names.push(...(await pager.nextItems()).map((s) => s.name));
    expect(names).toEqual(['OPENAI_KEY', 'OTHER']);
    const fp = nat.fingerprint;
    const updated = await Secret.update('OPENAI_KEY', `${VALUE}-rotated`, sdk);
    expect(updated.name).toBe('OPENAI_KEY');
    expect((await native('/api/v1/secrets/OPENAI_KEY')).fingerprint).not.toBe(fp);
    // Without hosts: sbx cannot know where the value may go → 400 saying how.
    await expect(Secret.create('NO_HOSTS', VALUE, sdk)).rejects.toThrow(/metadata: \{ hosts/);
    expect(await Secret.destroy('OTHER', sdk)).toBe(true);
    expect(await Secret.destroy('OTHER', sdk)).toBe(false);
  });

  it('network rules that fill a secret bind it at spawn: a placeholder in the sandbox, never the value', async () => {
    const bearer = `Bearer ${Secret.fill('OPENAI_KEY')}`;
    const sbx = await Sandbox.create({
      ...sdk,
      network: {
        denyOut: [ALL_TRAFFIC],
        allowOut: ['api.openai.com'],
        rules: { 'api.openai.com': [{ transform: { headers: { Authorization: bearer } } }] },
      },
    });
    const rec = await native(`/api/v1/sandboxes/${sbx.sandboxId}`);
    expect(rec.network).toBe('filtered');
    const seen = await sbx.commands.run('printf %s "$OPENAI_KEY"');
    expect(seen.stdout).toMatch(/^sbx_secret_[A-Za-z0-9_-]+$/);
    expect(seen.stdout).not.toContain(VALUE);
    await sbx.kill();

    const refused: Array<[Record<string, Array<{ transform: { headers: Record<string, string> } }>>, RegExp]> = [
      [{ 'api.example.com': [{ transform: { headers: { Authorization: bearer } } }] }, /may go only to .*api\.example\.com/],
      [{ 'api.openai.com': [{ transform: { headers: { Authorization: Secret.fill('MISSING') } } }] }, /secret MISSING.*not exist/],
    ];
    for (const [rules, message] of refused) {
      const err = await Sandbox.create({ ...sdk, network: { denyOut: [ALL_TRAFFIC], rules } }).catch((e: unknown) => e);
      expect(String((err as Error).message)).toMatch(message);
    }
    // Secrets need the filtered network: over an open one → 400.
    await expect(
      Sandbox.create({ ...sdk, network: { rules: { 'api.openai.com': [{ transform: { headers: { A: bearer } } }] } } }),
    ).rejects.toThrow(/need a filtered network/);
  });
});
