/** `sbx snapshot`, `sbx snapshots`, `sbx volumes` and `sbx spawn --snapshot/--volume` (DESIGN.md §10), in process against a real server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

describe('sbx snapshot, snapshots, volumes', () => {
  it('snapshot a sandbox, spawn from it with a volume, list, and remove both', async () => {
    const id = (await sbx(['spawn', '--ttl', '10m'])).stdout.trim();
    expect(id).toMatch(/^sb-/);
    expect((await sbx(['files', 'put', '-', `${id}:/workspace/cli.txt`], { stdin: 'from the cli' })).code).toBe(0);

    // A unique prefix of the id works, as for every sandbox command.
    const snap = await sbx(['snapshot', id.slice(0, 8), 'cli-base']);
    expect(snap.stderr).toBe('');
    expect(snap.code).toBe(0);
    expect(snap.stdout).toMatch(/^saved snapshot cli-base \(sbx-snapshot\/cli-base, \d+(\.\d+)? ?[KMG]?i?B\)\n$/);
    expect((await sbx(['snapshot', id, 'cli-base'])).code).toBe(1);
    const bad = await sbx(['snapshot', id, 'Bad Name']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^sbx: snapshot name must match/);

    const listed = await sbx(['snapshots', '--json']);
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ name: 'cli-base', provider: 'mock', kernel: null })]);
    expect((await sbx(['snapshots'])).stdout).toMatch(/NAME\s+PROVIDER\s+IMAGE\s+SIZE[\s\S]*cli-base\s+mock\s+sbx-snapshot\/cli-base/);

    expect((await sbx(['volumes', 'create', 'cli-vol'])).stdout).toBe('created volume cli-vol on mock\n');
    const child = (await sbx(['spawn', '--snapshot', 'cli-base', '--volume', 'cli-vol:/vol'])).stdout.trim();
    const got = JSON.parse((await sbx(['get', child, '--json'])).stdout);
    expect(got).toMatchObject({ snapshot: 'cli-base', volumes: [{ name: 'cli-vol', mount_path: '/vol' }] });
    const human = (await sbx(['get', child])).stdout;
    expect(human).toMatch(/snapshot:\s+cli-base\n/);
    expect(human).toMatch(/volumes:\s+cli-vol:\/vol\n/);
    expect((await sbx(['files', 'cat', `${child}:/workspace/cli.txt`])).stdout).toBe('from the cli');
    expect((await sbx(['spawn', '--volume', 'no-colon'])).code).toBe(2);
    const missing = await sbx(['spawn', '--volume', 'nope:/x']);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toBe('sbx: volume nope not found\n');

    const vols = JSON.parse((await sbx(['volumes', '--json'])).stdout);
    expect(vols).toEqual([{ name: 'cli-vol', provider: 'mock', size_bytes: 0, created_at: expect.any(String) }]);
    const busy = await sbx(['volumes', 'rm', 'cli-vol']);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/^sbx: volume cli-vol is mounted by sandbox/);
    await sbx(['rm', child]);
    expect((await sbx(['volumes', 'rm', 'cli-vol'])).stdout).toBe('deleted volume cli-vol\n');
    expect((await sbx(['snapshots', 'rm', 'cli-base'])).stdout).toBe('deleted snapshot cli-base\n');
    expect((await sbx(['snapshots'])).stderr).toContain('no snapshots');
  });
});
