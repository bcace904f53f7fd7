/** `sbx pause`, `sbx resume` and `sbx spawn --auto-pause --on-expire` (DESIGN.md §16), in process against a real server on mock. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/client.js';
import { pauseCommand, resumeCommand } from '../../src/transports/cli/commands/pause.js';
import { spawnCommand } from '../../src/transports/cli/commands/spawn.js';
import { runCommand } from '../../src/transports/cli/run-command.js';
import { fakeCli } from '../helpers/cli-context.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

let srv: TestServer;
beforeAll(async () => {
  srv = await startTestServer();
});
afterAll(async () => srv?.close());

describe('sbx pause / resume', () => {
  it('spawn with --auto-pause and --on-expire, pause by prefix, resume; the typed client sees the states', async () => {
    const spawn = fakeCli({ url: srv.url, json: true });
    expect(await runCommand(spawnCommand, spawn.ctx, { ttl: '5m', autoPause: '10m', onExpire: 'pause' })).toBe(0);
    const s = JSON.parse(spawn.stdout()) as { id: string; auto_pause: string; on_expire: string };
    await spawn.close();
    expect(s).toMatchObject({ auto_pause: '10m0s', on_expire: 'pause' });

    const pause = fakeCli({ url: srv.url });
    expect(await runCommand(pauseCommand, pause.ctx, { id: s.id.slice(0, 8) })).toBe(0);
    expect(pause.stdout()).toBe(`${s.id} paused\n`);
    await pause.close();
    const client = new Client({ url: srv.url });
    expect((await client.get(s.id)).state).toBe('paused');

    const resume = fakeCli({ url: srv.url, json: true });
    expect(await runCommand(resumeCommand, resume.ctx, { id: s.id })).toBe(0);
    expect(JSON.parse(resume.stdout()).state).toBe('running');
    await resume.close();
    expect((await client.pause(s.id)).state).toBe('paused');
    expect((await client.resume(s.id)).state).toBe('running');
  });

  it('an unknown sandbox exits 4 with one line', async () => {
    const pause = fakeCli({ url: srv.url });
    expect(await runCommand(pauseCommand, pause.ctx, { id: 'sb-nope-nothing' })).toBe(4);
    expect(pause.stderr()).toMatch(/^sbx: .*not found.*\n$/);
    await pause.close();
  });
});
