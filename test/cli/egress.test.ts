/** `sbx spawn --network filtered --allow … --deny …` and `sbx egress ID` (DESIGN.md §10), in process against a real server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Provider, SpawnSpec } from '../../src/core/ports/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;

beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => {
  await server?.close();
});

describe('sbx egress', () => {
  it('a provider that cannot enforce rules: 501 with the reason; bad rules name themselves', async () => {
    const r = await sbx(['spawn', '--allow', 'pypi.org']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toMatch(/filtered.*provider mock cannot/);
    const bad = await sbx(['spawn', '--network', 'bridge', '--allow', 'pypi.org']);
    expect(bad.stderr).toMatch(/need network "filtered"/);
    const rule = await sbx(['spawn', '--allow', 'a.*.b']);
    expect(rule.stderr).toContain('"a.*.b"');
  });

  it('spawn with rules, then replace them', async () => {
    // A stand-in enforcer on the mock (test/docker/egress.test.ts does the real thing).
    const mock = server.plane.deps.providers.get('mock') as Provider;
    const spawn = (Object.getOwnPropertyDescriptor(mock, 'spawn')!.value as Provider['spawn']).bind(mock);
    Object.assign(mock, {
      egress: { unavailable: () => null, changed: () => undefined },
      spawn: async (spec: SpawnSpec, signal?: AbortSignal) => {
        const { network, ...rest } = spec;
        return { ...(await spawn(rest, signal)), network: network ?? 'host' };
      },
    });
    const id = (await sbx(['spawn', '--network', 'filtered', '--allow', 'PyPI.org', '--deny', '10.0.0.0/8'])).stdout.trim();
    expect(id).toMatch(/^sb-/);
    expect(JSON.parse((await sbx(['get', id, '--json'])).stdout)).toMatchObject({
      network: 'filtered',
      egress: { allow: ['pypi.org'], deny: ['10.0.0.0/8'] },
    });
    const put = await sbx(['egress', id.slice(0, 8), '--allow', 'files.pythonhosted.org:443']);
    expect(put.stderr).toBe('');
    expect(put.stdout).toBe(`${id} egress: allow files.pythonhosted.org:443; deny (nothing)\n`);
    const plain = (await sbx(['spawn', '--network', 'bridge'])).stdout.trim();
    const conflict = await sbx(['egress', plain, '--allow', 'x.org']);
    expect(conflict.code).not.toBe(0);
    expect(conflict.stderr).toMatch(/only to network "filtered"/);
  });
});
