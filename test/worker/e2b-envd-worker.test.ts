import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CommandExitError, Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Worker } from '../../src/compose/worker.js';
import { envdSdkFor } from '../helpers/e2b-sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTestWorker } from '../helpers/worker.js';

/**
 * E2B's SDK against a control plane whose sandboxes live on a real `sbx worker` (DESIGN.md §14: any
 * provider, any worker): commands and files of the envd plane go through the worker RPC.
 */
describe('E2B SDK envd plane through an sbx worker', () => {
  let cp: TestServer;
  let worker: Worker;
  let dir: string;
  const requested: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-envd-worker-'));
    cp = await startTestServer({ server: { local_worker: false }, auth: { worker_token: 'envd-token' } });
    worker = await startTestWorker(dir, { id: 'ew', controlPlane: cp.url, auth: { worker_token: 'envd-token' } });
  }, 60_000);
  afterAll(async () => {
    await worker?.stop();
    await cp?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
    for (const url of requested) expect(url.startsWith(`${cp.url}/e2b/`)).toBe(true);
  });

  it('runs commands (streamed, exit codes, stdin) and moves files on the worker', async () => {
    const sbx = await Sandbox.create({ ...envdSdkFor(cp.url, requested), envs: { WHERE: 'worker' }, timeoutMs: 120_000 });
    const rec = await cp.plane.deps.store.getSandbox(sbx.sandboxId);
    expect(rec?.worker_id).toBe('ew');

    const chunks: string[] = [];
    const r = await sbx.commands.run('echo "hi from $WHERE"; sleep 0.5; echo bye', { onStdout: (d) => void chunks.push(d) });
    expect(r.stdout).toBe('hi from worker\nbye\n');
    expect(chunks[0]).toBe('hi from worker\n');
    await expect(sbx.commands.run('exit 4')).rejects.toBeInstanceOf(CommandExitError);

    const h = await sbx.commands.run('cat', { background: true, stdin: true });
    expect((await sbx.commands.list()).map((p) => p.pid)).toEqual([h.pid]);
    await h.sendStdin('through the rpc');
    await h.closeStdin();
    expect((await h.wait()).stdout).toBe('through the rpc');

    await sbx.files.write('/workspace/w/a.txt', 'remote file');
    expect(await sbx.files.read('/workspace/w/a.txt')).toBe('remote file');
    expect((await sbx.files.list('/workspace/w')).map((e) => e.name)).toEqual(['a.txt']);
    expect((await sbx.commands.run('cat w/a.txt')).stdout).toBe('remote file');
    await sbx.kill();
  }, 120_000);
});
