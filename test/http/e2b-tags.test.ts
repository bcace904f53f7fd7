import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Process } from '../../src/transports/e2b/envd/gen/process/process_pb.js';
import { envdSdkFor } from '../helpers/e2b-sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

/**
 * E2B's process tags (DESIGN.md §14) over the envd plane with a Connect client on the published
 * wire (E2B's JS SDK reads tags in `list`; other clients start and select by them): start with a
 * tag, list shows it, connect, send input and kill by tag; a tag of another sandbox is not found.
 */
describe('E2B process tags', () => {
  let srv: TestServer;
  let a: Sandbox;
  let b: Sandbox;
  beforeAll(async () => {
    srv = await startTestServer();
    const sdk = envdSdkFor(srv.url, []);
    a = await Sandbox.create({ ...sdk });
    b = await Sandbox.create({ ...sdk });
  });
  afterAll(async () => {
    await a?.kill();
    await b?.kill();
    await srv?.close();
  });

  const clientFor = (id: string) =>
    createClient(
      Process,
      createConnectTransport({
        baseUrl: `${srv.url}/e2b/sandbox`,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('e2b-sandbox-id', id);
            return next(req);
          },
        ],
      }),
    );

  it('start with a tag; list shows it; input, connect and kill by tag', async () => {
    const rpc = clientFor(a.sandboxId);
    const stream = rpc.start({
      process: { cmd: '/bin/sh', args: ['-c', 'read l; echo "got $l"; sleep 60'] },
      tag: 'worker-1',
      stdin: true,
    });
    const it = stream[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.value?.event?.event.case).toBe('start');
    const pid = (first.value!.event!.event.value as { pid: number }).pid;

    const listed = await rpc.list({});
    expect(listed.processes.map((p) => ({ pid: p.pid, tag: p.tag }))).toEqual([{ pid, tag: 'worker-1' }]);
    // The SDK reads the tag from list as E2B answers it.
    expect((await a.commands.list()).map((p) => p.tag)).toEqual(['worker-1']);

    await rpc.sendInput({
      process: { selector: { case: 'tag', value: 'worker-1' } },
      input: { input: { case: 'stdin', value: new TextEncoder().encode('hi\n') } },
    });
    let out = '';
    const deadline = Date.now() + 10_000;
    while (!out.includes('got hi') && Date.now() < deadline) {
      const n = await it.next();
      const ev = n.value?.event?.event;
      if (ev?.case === 'data' && ev.value.output.case === 'stdout') out += Buffer.from(ev.value.output.value).toString();
    }
    expect(out).toBe('got hi\n');

    // Another sandbox does not see the tag.
    await expect(
      clientFor(b.sandboxId).sendSignal({ process: { selector: { case: 'tag', value: 'worker-1' } }, signal: 9 }),
    ).rejects.toThrow(/no running process is tagged/);
    const connected = rpc.connect({ process: { selector: { case: 'tag', value: 'worker-1' } } })[Symbol.asyncIterator]();
    const start = await connected.next();
    expect((start.value?.event?.event.value as { pid: number }).pid).toBe(pid);
    await connected.return?.();

    await rpc.sendSignal({ process: { selector: { case: 'tag', value: 'worker-1' } }, signal: 9 });
    await waitFor('the killed process gone from the list', async () => (await rpc.list({})).processes.length === 0);
    await expect(rpc.sendSignal({ process: { selector: { case: 'tag', value: 'worker-1' } }, signal: 9 })).rejects.toThrow(
      /no running process/,
    );
    // A bad tag is refused before anything runs.
    const bad = rpc.start({ process: { cmd: '/bin/true' }, tag: 'x\u0001' });
    await expect(bad[Symbol.asyncIterator]().next()).rejects.toThrow(/process tag/);
    await it.return?.();
  });
});
