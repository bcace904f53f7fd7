/** `sbx exec -d`, `sbx ps`, `sbx logs --process`, `sbx kill` against a real server (mock provider). */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

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

describe('background processes in the CLI', () => {
  it('exec -d prints a process id; logs --process -f prints both streams and exits with its code', async () => {
    const started = await sbx(['exec', '-d', '--sh', id, "printf 'one\\n'; sleep 1; printf 'oops\\n' >&2; printf 'two\\n'; exit 3"]);
    expect(started.code).toBe(0);
    const pid = started.stdout.trim();
    expect(pid).toMatch(/^p-[a-z0-9]{12}$/);
    const logs = await sbx(['logs', id.slice(0, 8), '--process', pid, '-f']);
    expect(logs.code).toBe(3);
    expect(logs.stdout).toBe('one\ntwo\n');
    expect(logs.stderr).toBe('oops\n');
    const ps = await sbx(['ps', id]);
    expect(ps.code).toBe(0);
    expect(ps.stdout).toMatch(new RegExp(`${pid}\\s+exited\\s+3\\s+`));
    const json = JSON.parse((await sbx(['--json', 'ps', id])).stdout) as Array<{ id: string; state: string; exit_code: number }>;
    expect(json.find((p) => p.id === pid)).toMatchObject({ state: 'exited', exit_code: 3 });
  });

  it('kill ends a running process; kill -s sends a signal; bad input is one line and a non-zero exit', async () => {
    const a = (await sbx(['exec', '-d', id, 'sleep', '100'])).stdout.trim();
    const b = (await sbx(['exec', '-d', id, 'sleep', '100'])).stdout.trim();
    const killed = await sbx(['kill', id, a]);
    expect(killed.code).toBe(0);
    expect(killed.stdout.trim()).toMatch(new RegExp(`^${a} killed`));
    const termed = await sbx(['kill', '-s', 'TERM', id, b]);
    expect(termed.code).toBe(0);
    const until = Date.now() + 10_000;
    let state = '';
    while (
      Date.now() < until &&
      (state = JSON.parse((await sbx(['--json', 'ps', id])).stdout).find((p: { id: string }) => p.id === b).state) === 'running'
    )
      await new Promise((r) => setTimeout(r, 200));
    expect(state).toBe('exited');
    const bad = await sbx(['kill', '-s', 'STOP', id, b]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr.trim().split('\n')).toHaveLength(1);
    expect(bad.stderr).toMatch(/STOP/);
    const unknown = await sbx(['logs', id, '--process', 'p-nosuchprocess']);
    expect(unknown.code).not.toBe(0);
    expect(unknown.stderr).toMatch(/not found/);
    expect((await sbx(['exec', '-d', '-i', id, 'cat'])).code).not.toBe(0);
  });
});
