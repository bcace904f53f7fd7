/**
 * Sandbox id prefixes (DESIGN.md §5): the id as given first, then on a 404 the lookup
 * `GET /api/v1/sandboxes?id_prefix=P&limit=2` (visibility in the query): one match is used, none is
 * not found, two are ambiguous and listed (exit 2; 125 for exec). Also the route's validation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomIds } from '../../src/adapters/system/clock-ids.js';
import type { IdSource } from '../../src/core/ports/index.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

/** Sandbox ids handed out in this order (then random ones). */
function queuedIds(queue: string[]): IdSource {
  return { sandboxId: () => queue.shift() ?? randomIds.sandboxId(), randomId: (n) => randomIds.randomId(n) };
}

describe('sandbox id prefixes', () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  beforeAll(async () => {
    server = await startTestServer(
      { auth: { enforce_ownership: true } },
      { ids: queuedIds(['sb-pfx1aaa', 'sb-pfx1bbb', 'sb-pfx2ccc', 'sb-a_c000', 'sb-abc000', 'sb-own9alice', 'sb-own9free']) },
    );
    sbx = sbxAt(server.url);
    for (const owner of [[], [], [], [], [], ['--owner', 'alice'], []]) {
      expect((await sbx(['spawn', ...owner])).code).toBe(0);
    }
  });
  afterAll(async () => {
    await server?.close();
  });

  it('a unique prefix, with or without sb-, works for get, extend, logs, exec, files and rm', async () => {
    for (const p of ['pfx2', 'sb-pfx2', 'pfx2c', 'sb-pfx2ccc']) {
      const r = await sbx(['get', '--json', p]);
      expect({ p, code: r.code, stderr: r.stderr }).toEqual({ p, code: 0, stderr: '' });
      expect(JSON.parse(r.stdout).id).toBe('sb-pfx2ccc');
    }
    const ext = await sbx(['extend', 'pfx2', '--ttl', '20m']);
    expect(ext.stdout).toMatch(/^sb-pfx2ccc now expires at /);
    const exec = await sbx(['exec', 'pfx2', 'echo', 'by prefix']);
    expect(exec).toMatchObject({ code: 0, stdout: 'by prefix\n' });
    const logs = await sbx(['logs', 'pfx2']);
    expect(logs.code).toBe(0);
    expect(logs.stdout).toContain('by prefix');
    expect((await sbx(['files', 'put', '-', 'pfx2:/tmp/p.txt'], { stdin: 'prefixed file' })).code).toBe(0);
    expect((await sbx(['files', 'cat', 'sb-pfx2:/tmp/p.txt'])).stdout).toBe('prefixed file');
    expect((await sbx(['files', 'glob', 'pfx2', '/tmp/p.*'])).stdout).toBe('/tmp/p.txt\n');
    const rm = await sbx(['rm', 'pfx2']);
    expect(rm).toMatchObject({ code: 0, stdout: 'destroyed sb-pfx2ccc\n' });
    expect((await sbx(['get', 'sb-pfx2ccc'])).code).toBe(4);
  });

  it('no match keeps the not-found error (exit 4; 125 for exec)', async () => {
    const get = await sbx(['get', 'zzz']);
    expect(get).toMatchObject({ code: 4, stderr: 'sbx: sandbox zzz not found\n' });
    // The destroyed sandbox no longer matches its prefix.
    expect((await sbx(['get', 'pfx2'])).code).toBe(4);
    expect((await sbx(['exec', 'zzz', 'true'])).code).toBe(125);
    expect((await sbx(['files', 'cat', 'zzz:/tmp/x'])).code).toBe(4);
  });

  it('two matches are ambiguous: listed, exit 2 (125 for exec), nothing done', async () => {
    const get = await sbx(['get', 'pfx1']);
    expect(get.code).toBe(2);
    expect(get.stderr).toBe(
      'sbx: sandbox id prefix "pfx1" matches more than one sandbox (sb-pfx1aaa, sb-pfx1bbb, …): give more characters of the id\n',
    );
    const exec = await sbx(['exec', 'sb-pfx1', 'echo', 'never']);
    expect(exec.code).toBe(125);
    expect(exec.stdout).toBe('');
    expect(exec.stderr).toMatch(/^sbx: sandbox id prefix "sb-pfx1" matches more than one sandbox \(sb-pfx1aaa, sb-pfx1bbb, …\)/);
    const rm = await sbx(['rm', 'pfx1']);
    expect(rm.code).toBe(2);
    expect((await sbx(['get', 'sb-pfx1aaa'])).code).toBe(0);
    expect((await sbx(['get', 'sb-pfx1bbb'])).code).toBe(0);
  });

  it('_ and % in a prefix are literal characters', async () => {
    const r = await sbx(['get', '--json', 'a_']);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).id).toBe('sb-a_c000');
    expect((await sbx(['get', 'a%'])).code).toBe(4);
  });

  it("another owner's sandbox is not a match: the lookup applies visibility", async () => {
    // sb-own9alice is private to alice; for bob only sb-own9free matches the prefix.
    const bob = await sbx(['--user', 'bob', 'get', '--json', 'own9']);
    expect(bob.code).toBe(0);
    expect(JSON.parse(bob.stdout).id).toBe('sb-own9free');
    const alice = await sbx(['--user', 'alice', 'get', 'own9']);
    expect(alice.code).toBe(2);
    expect(alice.stderr).toContain('sb-own9alice, sb-own9free');
    expect((await sbx(['--user', 'bob', 'get', 'own9a'])).code).toBe(4);
  });

  it('GET /api/v1/sandboxes validates id_prefix and limit; without limit the whole list', async () => {
    const list = async (qs: string, user?: string) => {
      const res = await fetch(`${server.url}/api/v1/sandboxes${qs}`, { headers: user ? { 'x-user-id': user } : {} });
      return { status: res.status, body: (await res.json()) as unknown };
    };
    const all = await list('');
    expect(all.status).toBe(200);
    const allIds = (all.body as Array<{ id: string }>).map((s) => s.id);
    expect(allIds).toEqual(['sb-pfx1aaa', 'sb-pfx1bbb', 'sb-a_c000', 'sb-abc000', 'sb-own9free']);
    expect((await list('?limit=2')).body).toEqual((all.body as unknown[]).slice(0, 2));
    const page = await list('?id_prefix=sb-pfx1&limit=1');
    expect((page.body as Array<{ id: string }>).map((s) => s.id)).toEqual(['sb-pfx1aaa']);
    const literal = await list(`?id_prefix=${encodeURIComponent('sb-a_')}`);
    expect((literal.body as Array<{ id: string }>).map((s) => s.id)).toEqual(['sb-a_c000']);
    const owned = await list('?id_prefix=sb-own9&limit=2', 'alice');
    expect((owned.body as Array<{ id: string }>).map((s) => s.id)).toEqual(['sb-own9alice', 'sb-own9free']);
    for (const qs of ['?limit=0', '?limit=1001', '?limit=abc', '?limit=1.5', `?id_prefix=${'x'.repeat(129)}`]) {
      const bad = await list(qs);
      expect({ qs, status: bad.status }).toEqual({ qs, status: 400 });
      expect(bad.body).toMatchObject({ code: 'bad_request', message: expect.any(String) });
    }
    expect((await list(`?id_prefix=${'x'.repeat(128)}&limit=1000`)).body).toEqual([]);
  });
});

describe('files misuse gets a usage error with the right form', () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  let id: string;
  beforeAll(async () => {
    server = await startTestServer();
    sbx = sbxAt(server.url);
    id = (await sbx(['spawn'])).stdout.trim();
  });
  afterAll(async () => {
    await server?.close();
  });

  it('glob with ID:PATH and a pattern exits 2 and shows both right forms', async () => {
    const r = await sbx(['files', 'glob', `${id}:/workspace`, '/workspace/*']);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `sbx: glob takes the pattern once: sbx files glob ${id} '/workspace/*' (or sbx files glob '${id}:/workspace/*')\n`,
    );
    // Both right forms work.
    expect((await sbx(['files', 'put', '-', `${id}:/workspace/a.py`], { stdin: 'x' })).code).toBe(0);
    expect((await sbx(['files', 'glob', id, '/workspace/*.py'])).stdout).toBe('/workspace/a.py\n');
    expect((await sbx(['files', 'glob', `${id}:/workspace/*.py`])).stdout).toBe('/workspace/a.py\n');
  });

  it('every files subcommand answers misuse with exit 2 and its form, before any request', async () => {
    const nowhere = sbxAt('http://127.0.0.1:9');
    const cases: Array<[string[], RegExp]> = [
      [['files', 'cat', id, '/etc/hosts'], /too many arguments.*\(usage: sbx files cat \[options\] SANDBOX_ID:\/path\)/],
      [['files', 'cat', id], /expected SANDBOX_ID:\/path, got "sb-\w+"; usage: sbx files cat SANDBOX_ID:\/path/],
      [['files', 'stat', '/etc/hosts'], /usage: sbx files stat SANDBOX_ID:\/path/],
      [['files', 'rm', id], /usage: sbx files rm \[-r\] SANDBOX_ID:\/path/],
      [['files', 'ls', id, '/tmp'], /too many arguments.*usage: sbx files ls \[options\] SANDBOX_ID\[:\/path\]/],
      [
        ['files', 'put', `${id}:/tmp/x`, './local'],
        new RegExp(`put uploads LOCAL to SANDBOX_ID:/path: sbx files put ./local ${id}:/tmp/x`),
      ],
      [
        ['files', 'get', './local', `${id}:/tmp/x`],
        new RegExp(`get downloads SANDBOX_ID:/path to LOCAL: sbx files get ${id}:/tmp/x ./local`),
      ],
      [['files', 'chmod', `${id}:/tmp/x`, '755'], new RegExp(`the mode comes first: sbx files chmod 755 ${id}:/tmp/x`)],
      [['files', 'mv', `${id}:/a`, 'other:/b'], /mv works inside one sandbox.*usage: sbx files mv SANDBOX_ID:\/from \/to/],
    ];
    for (const [argv, message] of cases) {
      const r = await nowhere(argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(r.stderr).toMatch(message);
      expect(r.stderr.split('\n')).toHaveLength(2);
    }
  });
});
