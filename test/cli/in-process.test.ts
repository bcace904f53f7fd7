/**
 * Command handlers run in process with a fake context (issue 18 item 6): the same handler code the
 * `sbx` binary runs, against a real test server, with output captured and no child process. What
 * the binary adds on top (argv parsing, signals) is covered by test/e2e/cli-bin.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execCommand } from '../../src/transports/cli/commands/exec.js';
import { getCommand } from '../../src/transports/cli/commands/get.js';
import { lsCommand } from '../../src/transports/cli/commands/ls.js';
import { rmCommand } from '../../src/transports/cli/commands/rm.js';
import { spawnCommand } from '../../src/transports/cli/commands/spawn.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => {
  await srv.close();
});

describe('command handlers with a fake context', () => {
  it('spawn → ls → get → exec → rm, with the JSON each prints and the codes each returns', async () => {
    const cli = fakeCli({ url: srv.url, json: true });
    try {
      expect(await runCommand(spawnCommand, cli.ctx, { ttl: '5m' })).toBe(0);
      const spawned = JSON.parse(cli.stdout()) as { id: string; state: string };
      expect(spawned.state).toBe('running');

      const ls = fakeCli({ url: srv.url, json: true });
      expect(await runCommand(lsCommand, ls.ctx, {})).toBe(0);
      expect((JSON.parse(ls.stdout()) as Array<{ id: string }>).map((s) => s.id)).toContain(spawned.id);
      await ls.close();

      // A unique prefix resolves, as on the command line.
      const get = fakeCli({ url: srv.url });
      expect(await runCommand(getCommand, get.ctx, { id: spawned.id.slice(0, 7) })).toBe(0);
      expect(get.stdout()).toContain(spawned.id);
      await get.close();

      const ex = fakeCli({ url: srv.url });
      expect(await runCommand(execCommand, ex.ctx, { id: spawned.id, command: ['sh', '-c', 'echo out; echo err >&2; exit 3'] })).toBe(3);
      expect(ex.stdout()).toBe('out\n');
      expect(ex.stderr()).toBe('err\n');
      await ex.close();

      const rm = fakeCli({ url: srv.url });
      expect(await runCommand(rmCommand, rm.ctx, { ids: [spawned.id] })).toBe(0);
      await rm.close();
    } finally {
      await cli.close();
    }
  });

  it('failures become one line and the documented exit code', async () => {
    const get = fakeCli({ url: srv.url });
    expect(await runCommand(getCommand, get.ctx, { id: 'sb-nope-nothing' })).toBe(4);
    expect(get.stderr()).toMatch(/^sbx: .*not found.*\n$/);
    expect(get.stdout()).toBe('');
    await get.close();

    const ex = fakeCli({ url: srv.url });
    expect(await runCommand(execCommand, ex.ctx, { id: 'sb-nope-nothing', command: ['true'] })).toBe(125);
    expect(ex.stderr().split('\n').filter(Boolean)).toHaveLength(1);
    await ex.close();

    const down = fakeCli({ url: 'http://127.0.0.1:9' });
    expect(await runCommand(lsCommand, down.ctx, {})).toBe(6);
    expect(down.stderr()).toMatch(/^sbx: /);
    await down.close();
  });
});
