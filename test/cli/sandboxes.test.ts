import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { runSbx, sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;

beforeAll(async () => {
  server = await startTestServer({ defaults: { max_ttl: '2h' } });
  sbx = sbxAt(server.url);
});
afterAll(async () => {
  await server?.close();
});

describe('sbx spawn / ls / get / extend / rm', () => {
  it('spawn prints only the id when stdout is not a terminal', async () => {
    const r = await sbx(['spawn', '--ttl', '10m', '--meta', 'team=ml', '--meta', 'tier=a=b']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(r.stdout).toMatch(/^sb[-_][A-Za-z0-9]+\n$/);
    const id = r.stdout.trim();
    const got = await sbx(['get', id, '--json']);
    expect(got.code).toBe(0);
    const box = JSON.parse(got.stdout);
    expect(box.id).toBe(id);
    expect(box.state).toBe('running');
    expect(box.metadata).toEqual({ team: 'ml', tier: 'a=b' });
    const ttlMs = Date.parse(box.expires_at) - Date.parse(box.created_at);
    expect(ttlMs).toBeGreaterThan(9 * 60_000);
    expect(ttlMs).toBeLessThanOrEqual(10 * 60_000 + 1000);
  });

  it('spawn shows a summary on a terminal and the API JSON with --json', async () => {
    const tty = await sbx(['spawn', '--no-color'], { tty: true });
    expect(tty.code).toBe(0);
    expect(tty.stdout).toMatch(/spawned sb[-_]\w+/);
    expect(tty.stdout).toMatch(/state:\s+running/);
    expect(tty.stdout).not.toContain('\x1b[');
    const json = await sbx(['--json', 'spawn', '--owner', 'alice']);
    expect(json.code).toBe(0);
    const box = JSON.parse(json.stdout);
    expect(box.owner_id).toBe('alice');
    expect(box.provider).toBe('mock');
  });

  it('ls lists live sandboxes as a table, ids with -q, JSON with --json', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    const table = await sbx(['ls']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+STATE\s+PROVIDER\s+IMAGE\s+OWNER\s+EXPIRES\s+METADATA$/);
    expect(table.stdout).toContain(id);
    const quiet = await sbx(['ls', '-q']);
    expect(quiet.stdout.split('\n')).toContain(id);
    const json = JSON.parse((await sbx(['ls', '--json'])).stdout);
    expect(json.map((s: { id: string }) => s.id)).toContain(id);
  });

  it('extend moves expires_at', async () => {
    const id = (await sbx(['spawn', '--ttl', '1m'])).stdout.trim();
    const r = await sbx(['extend', id, '--ttl', '1h', '--json']);
    expect(r.code).toBe(0);
    const left = Date.parse(JSON.parse(r.stdout).expires_at) - Date.now();
    expect(left).toBeGreaterThan(59 * 60_000);
    const human = await sbx(['extend', id, '--ttl', '30m']);
    expect(human.stdout).toContain(`${id} now expires at`);
    const missing = await sbx(['extend', id]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('--ttl');
  });

  it('rm destroys, reports unknown ids with exit 4, and prunes with --all-expired', async () => {
    const id = (await sbx(['spawn'])).stdout.trim();
    const r = await sbx(['rm', id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`destroyed ${id}\n`);
    const gone = await sbx(['get', id]);
    expect(gone.code).toBe(4);
    expect(gone.stderr).toMatch(/^sbx: .+\n$/);
    const unknown = await sbx(['rm', 'sb-doesnotexist']);
    expect(unknown.code).toBe(4);
    expect(unknown.stderr).toContain('sb-doesnotexist');
    const prune = await sbx(['rm', '--all-expired', '--json']);
    expect(prune.code).toBe(0);
    expect(JSON.parse(prune.stdout)).toEqual({ pruned: 0 });
    const none = await sbx(['rm']);
    expect(none.code).toBe(2);
  });

  it('admission answers allowed, and exits 5 when the TTL is over the maximum', async () => {
    const ok = await sbx(['admission', '--ttl', '10m', '--json']);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout).allowed).toBe(true);
    const denied = await sbx(['admission', '--ttl', '5h']);
    expect(denied.code).toBe(5);
    expect(denied.stdout).toMatch(/allowed:\s+no/);
    // --template asks about the template's spawn: its TTL counts unless a flag overrides it.
    expect((await sbx(['templates', 'create', 'long', '--ttl', '5h'])).code).toBe(0);
    const viaTemplate = await sbx(['admission', '--template', 'long', '--json']);
    expect(viaTemplate.code).toBe(5);
    expect(JSON.parse(viaTemplate.stdout)).toMatchObject({ allowed: false, reason: 'max_ttl' });
    expect((await sbx(['admission', '--template', 'long', '--ttl', '1h'])).code).toBe(0);
    expect((await sbx(['admission', '--template', 'missing'])).code).toBe(4);
    expect((await sbx(['templates', 'rm', 'long'])).code).toBe(0);
  });

  it('spawn over the TTL maximum is rejected with exit 5', async () => {
    const r = await sbx(['spawn', '--ttl', '5h']);
    expect(r.code).toBe(5);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^sbx: .*ttl.*\n$/i);
  });
});

describe('usage errors and unreachable servers', () => {
  it('bad option values exit 2 before any request', async () => {
    // The URL points nowhere: a request would exit 6, so 2 proves nothing was sent.
    const at = sbxAt('http://127.0.0.1:9');
    for (const argv of [
      ['spawn', '--memory', 'lots'],
      ['spawn', '--meta', 'novalue'],
      ['spawn', '--ttl', 'soon'],
      ['files', 'chmod', 'rwx', 'sb-x:/a'],
      ['files', 'cat', 'no-colon'],
    ]) {
      const r = await at(argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 2 });
      expect(r.stderr).toMatch(/^sbx: /);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
    }
    // sbx exec keeps 2 for nothing: its usage errors are 125 (DESIGN.md §5), also before any request.
    for (const argv of [
      ['exec', '--env', '=v', 'sb-x', '--', 'true'],
      ['exec', 'sb-x'],
      ['exec', 'sb-x:/tmp', 'true'],
    ]) {
      const r = await at(argv);
      expect({ argv, code: r.code }).toEqual({ argv, code: 125 });
      expect(r.stderr).toMatch(/^sbx: [^\n]+\n$/);
    }
  });

  it('an unknown command or option exits 2 with a suggestion', async () => {
    const cmd = await runSbx(['spwan']);
    expect(cmd.code).toBe(2);
    expect(cmd.stderr).toBe("sbx: unknown command 'spwan' (Did you mean spawn?)\n");
    const opt = await runSbx(['spawn', '--imag', 'x']);
    expect(opt.code).toBe(2);
    expect(opt.stderr).toContain("unknown option '--imag'");
    expect(opt.stderr).toContain('--image');
  });

  it('an unreachable server exits 6 and names the URL', async () => {
    const r = await runSbx(['ls'], { env: { SBX_URL: 'http://127.0.0.1:9' } });
    expect(r.code).toBe(6);
    expect(r.stderr).toBe('sbx: cannot reach sbx server at http://127.0.0.1:9: connection refused (ECONNREFUSED)\n');
  });

  it('--url beats SBX_URL, which beats the client profile', async () => {
    const flag = await runSbx(['--url', server.url, 'ls', '-q'], { env: { SBX_URL: 'http://127.0.0.1:9' } });
    expect(flag.code).toBe(0);
    const env = await runSbx(['ls', '-q'], { env: { SBX_URL: 'http://127.0.0.1:9' } });
    expect(env.code).toBe(6);
  });

  it('an invalid URL is a configuration error (exit 3)', async () => {
    const r = await runSbx(['ls'], { env: { SBX_URL: 'ftp://x' } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('SBX_URL');
  });
});
