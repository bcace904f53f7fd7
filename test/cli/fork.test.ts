/** `sbx fork` (DESIGN.md §16), in process against a real server: ids one per line, --json, bounds, the files copied. */
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

describe('sbx fork', () => {
  it('prints one new id per line; each fork has the file; --json answers the sandboxes; -n out of range is a usage error', async () => {
    const id = (await sbx(['spawn', '--ttl', '10m'])).stdout.trim();
    expect((await sbx(['files', 'put', '-', `${id}:/workspace/f.txt`], { stdin: 'forked by cli' })).code).toBe(0);

    const three = await sbx(['fork', id.slice(0, 8), '-n', '3', '--ttl', '5m', '--meta', 'job=7']);
    expect(three.stderr).toBe('');
    expect(three.code).toBe(0);
    const ids = three.stdout.trim().split('\n');
    expect(ids).toHaveLength(3);
    for (const f of ids) {
      expect(f).toMatch(/^sb-/);
      expect((await sbx(['files', 'cat', `${f}:/workspace/f.txt`])).stdout).toBe('forked by cli');
      expect(JSON.parse((await sbx(['get', f, '--json'])).stdout)).toMatchObject({ forked_from: id, metadata: { job: '7' } });
    }

    const json = await sbx(['fork', id, '--json']);
    expect(json.code).toBe(0);
    const forks = JSON.parse(json.stdout) as Array<{ id: string; forked_from: string }>;
    expect(forks).toHaveLength(1);
    expect(forks[0]!.forked_from).toBe(id);

    const bad = await sbx(['fork', id, '-n', '11']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--count must be from 1 to 10/);
    expect((await sbx(['fork', 'sb-nosuchsandbox'])).code).toBe(4);

    const key = await sbx(['fork', id, '--idempotency-key', 'cli-fork-1']);
    const again = await sbx(['fork', id, '--idempotency-key', 'cli-fork-1']);
    expect(again.stdout).toBe(key.stdout);
    expect(key.stdout.trim()).toMatch(/^sb-/);
  });
});
