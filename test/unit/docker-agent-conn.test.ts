import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AgentConnection, R } from '../../src/adapters/providers/docker/agent-conn.js';

function frame(id: number, type: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUInt32LE(5 + payload.length, 0);
  head.writeUInt32LE(id, 4);
  head[8] = type;
  return Buffer.concat([head, payload]);
}

function hello(token: string): Buffer {
  const p = Buffer.alloc(12);
  p.writeUInt32LE(1, 0);
  p.writeUInt32LE(1000, 4);
  p.writeUInt32LE(1001, 8);
  return frame(0, R.HELLO, Buffer.concat([p, Buffer.from(token)]));
}

// The host side of the agent protocol (docs/agent.md) against a fake agent on a unix socket.
describe('agent connection', () => {
  let dir: string;
  let server: Server | undefined;
  afterEach(() => {
    server?.close();
    server = undefined;
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const serve = async (onConn: (s: Socket) => void): Promise<string> => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-agent-conn-'));
    const path = join(dir, 'agent.sock');
    server = createServer(onConn);
    await new Promise<void>((r) => server!.listen(path, r));
    return path;
  };

  it('takes the hello with the right token, then frames split anywhere across reads', async () => {
    const big = Buffer.alloc(300_000, 7);
    const path = await serve((s) => {
      // Everything in one buffer, written in odd-sized pieces.
      const all = Buffer.concat([
        hello('tok'),
        frame(1, R.STDOUT, Buffer.from('ab')),
        frame(1, R.DATA, big),
        frame(1, R.EXIT, Buffer.alloc(4)),
      ]);
      let at = 0;
      const step = () => {
        if (at >= all.length) return;
        s.write(all.subarray(at, at + 1 + (at % 70_001)));
        at += 1 + (at % 70_001);
        setImmediate(step);
      };
      step();
    });
    const conn = await AgentConnection.connect(path, 'tok', 2_000);
    expect(conn.hello).toEqual({ version: 1, uid: 1000, gid: 1001 });
    const got: Array<[number, number]> = [];
    let data: Buffer = Buffer.alloc(0);
    await new Promise<void>((resolve) => {
      conn.open({
        frame: (type, payload) => {
          got.push([type, payload.length]);
          if (type === R.DATA) data = payload;
          if (type === R.EXIT) resolve();
        },
        lost: () => resolve(),
      });
    });
    expect(got).toEqual([
      [R.STDOUT, 2],
      [R.DATA, big.length],
      [R.EXIT, 4],
    ]);
    expect(data.equals(big)).toBe(true);
    conn.close();
  });

  it('refuses a hello with another token (a socket swapped for another sandbox’s) and a silent peer', async () => {
    const path = await serve((s) => s.write(hello('other')));
    await expect(AgentConnection.connect(path, 'tok', 2_000)).rejects.toThrow(/refused/);
    server!.close();
    const silent = join(dir, 'silent.sock');
    server = createServer(() => undefined);
    await new Promise<void>((r) => server!.listen(silent, r));
    await expect(AgentConnection.connect(silent, 'tok', 200)).rejects.toThrow(/no hello/);
  });

  it(
    'compares the token in constant time over its whole length: a prefix, a longer one, and an empty expected ' + 'token are refused',
    async () => {
      for (const [sent, expected] of [
        ['to', 'tok'],
        ['tok-and-more', 'tok'],
        ['', ''],
      ] as const) {
        const path = await serve((s) => s.write(hello(sent)));
        await expect(AgentConnection.connect(path, expected, 2_000)).rejects.toThrow(/refused/);
        server!.close();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  it('ends the connection on a frame bigger than the agent ever sends (a sandbox standing in for its agent)', async () => {
    const path = await serve((s) => {
      s.write(hello('tok'));
      const head = Buffer.alloc(9);
      head.writeUInt32LE(0xfffffff0, 0);
      head.writeUInt32LE(1, 4);
      head[8] = R.STDOUT;
      setTimeout(() => s.write(head), 20);
    });
    const conn = await AgentConnection.connect(path, 'tok', 2_000);
    const lost = new Promise<boolean>((resolve) => conn.open({ frame: () => undefined, lost: () => resolve(true) }));
    expect(await lost).toBe(true);
  });

  it('tells open streams when the connection is lost', async () => {
    let peer: Socket | undefined;
    const path = await serve((s) => {
      peer = s;
      s.write(hello('tok'));
    });
    const conn = await AgentConnection.connect(path, 'tok', 2_000);
    const lost = new Promise<boolean>((resolve) => conn.open({ frame: () => undefined, lost: () => resolve(true) }));
    peer!.destroy();
    expect(await lost).toBe(true);
    expect(conn.alive).toBe(false);
  });
});
