/**
 * The firecracker provider's host client (agent-client.ts) against the real guest agent
 * (`sbx-agent --unix`, built from agent/*.c by `npm run build`) over a unix socket standing in for
 * vsock: exec, streams, stdin, signals and kills, files, and frames that break the protocol.
 * Booting a guest is not covered here (docs/providers/firecracker.md says where it is).
 */
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentClient } from '../../src/adapters/providers/firecracker/agent-client.js';
import { encodeFrame, FrameReader } from '../../src/adapters/providers/firecracker/agent-protocol.js';
import { SbxError } from '../../src/core/errors.js';
import type { ExecEvent, ExecSpec } from '../../src/core/ports/index.js';
import { type GuestAgent, running, startGuestAgent } from '../helpers/guest-agent.js';
import { tempDir } from '../helpers/tmp.js';
import { waitFor } from '../helpers/wait.js';

let agent: GuestAgent;
let client: AgentClient;
let dir: string;

beforeAll(async () => {
  dir = tempDir('sbx-fcguest-');
  agent = await startGuestAgent(dir);
  client = agent.client();
});
afterAll(async () => {
  await agent?.stop();
});

const argv = (command: string, args: string[] = [], more: Partial<ExecSpec> = {}): ExecSpec => ({
  command,
  args,
  mode: 'argv',
  env: {},
  workdir: dir,
  ...more,
});

async function run(spec: ExecSpec, signal = new AbortController().signal) {
  const events: ExecEvent[] = [];
  for await (const ev of client.exec(spec, signal)) events.push(ev);
  const text = (s: 'stdout' | 'stderr') => Buffer.concat(events.flatMap((e) => (e.stream === s ? [e.data] : [])));
  const last = events[events.length - 1];
  return { events, stdout: text('stdout'), stderr: text('stderr'), exitCode: last?.stream === 'exit' ? last.exit_code : null };
}

async function failure(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return err as SbxError;
}

/** Resolves when the socket closes; rejects after `ms`. */
const closed = (sock: Socket, ms = 5_000) =>
  new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the agent kept the connection open')), ms);
    sock.on('data', () => undefined);
    sock.once('close', () => {
      clearTimeout(t);
      resolve();
    });
  });

/** Peak resident memory (VmHWM, KiB) of the agent, its connection handlers and their commands, all together. */
const peakKb = () =>
  agent
    .tree()
    .map((pid) => {
      try {
        return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
      } catch {
        return 0;
      }
    })
    .reduce((a, kb) => a + kb, 0);

describe('firecracker guest agent (the built sbx-agent --unix) with the host client', () => {
  it('answers ping', async () => {
    await expect(client.ping()).resolves.toBeUndefined();
  });

  it('exec: exit codes of true, false and sh -c exit 42', async () => {
    expect((await run(argv('true'))).exitCode).toBe(0);
    expect((await run(argv('false'))).exitCode).toBe(1);
    expect((await run(argv('sh', ['-c', 'exit 42']))).exitCode).toBe(42);
    expect((await run({ ...argv('exit 7'), mode: 'shell' })).exitCode).toBe(7);
  });

  it('exec: streams a few MiB of stdout byte-exact, in many frames', async () => {
    const content = randomBytes(5 * 1024 * 1024 + 123);
    writeFileSync(join(dir, 'big.bin'), content);
    const res = await run(argv('cat', [join(dir, 'big.bin')]));
    expect(res.exitCode).toBe(0);
    expect(res.stdout.equals(content)).toBe(true);
    expect(res.events.filter((e) => e.stream === 'stdout').length).toBeGreaterThan(10);
    expect(res.stderr.length).toBe(0);
  });

  it('exec: stdout and stderr apart, env overlaid on the agent environment, workdir', async () => {
    const res = await run(argv('sh', ['-c', 'echo out; echo err >&2; printf "%s|" "$FOO" "$PATH"; pwd'], { env: { FOO: 'a b"c' } }));
    expect(res.exitCode).toBe(0);
    expect(res.stderr.toString()).toBe('err\n');
    const [first, rest] = [res.stdout.toString().split('\n')[0], res.stdout.toString().split('\n')[1]];
    expect(first).toBe('out');
    const [foo, path, cwd] = rest!.split('|');
    expect(foo).toBe('a b"c');
    expect(path).toMatch(/\/bin/);
    expect(cwd).toBe(dir);
    const sub = join(dir, 'sub dir');
    mkdirSync(sub);
    expect((await run(argv('pwd', [], { workdir: sub }))).stdout.toString()).toBe(`${sub}\n`);
    const err = await failure(run(argv('pwd', [], { workdir: join(dir, 'missing') })));
    expect(err.code).toBe('bad_request');
    expect(err.message).toContain('is not an existing directory');
  });

  it('exec: a missing command is 127 and a non-executable file 126, with the exact stderr', async () => {
    expect(await run(argv('sbx-no-such-command-xyz'))).toMatchObject({ exitCode: 127 });
    expect((await run(argv('sbx-no-such-command-xyz'))).stderr.toString()).toBe('sbx: command not found: sbx-no-such-command-xyz\n');
    writeFileSync(join(dir, 'plain.txt'), 'x');
    const res = await run(argv('./plain.txt'));
    expect(res.exitCode).toBe(126);
    expect(res.stderr.toString()).toBe('sbx: permission denied: ./plain.txt\n');
  });

  it('exec: stdin as bytes and as a stream of several MiB', async () => {
    expect((await run(argv('cat', [], { stdin: Buffer.from('hello\n') }))).stdout.toString()).toBe('hello\n');
    const parts = Array.from({ length: 6 }, () => randomBytes(1024 * 1024));
    async function* stream() {
      for (const p of parts) yield p;
    }
    const res = await run(argv('cat', [], { stdin: stream() }));
    expect(res.exitCode).toBe(0);
    expect(res.stdout.equals(Buffer.concat(parts))).toBe(true);
    // 32 MiB for a command that reads nothing for a while: the agent stops taking it, it does not hold it.
    const chunk = Buffer.alloc(1024 * 1024, 1);
    let peak = 0;
    async function* flood() {
      for (let i = 0; i < 32; i++) yield chunk;
    }
    const slow = run(argv('sh', ['-c', 'sleep 1; wc -c'], { stdin: flood() }));
    await new Promise((r) => setTimeout(r, 700));
    peak = peakKb();
    const counted = await slow;
    expect(counted.stdout.toString().trim()).toBe(String(32 * 1024 * 1024));
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(16 * 1024);
  });

  it('exec: runs as the uid and gid asked for', async () => {
    const res = await run(argv('id', [], { user: { uid: 65534, gid: 65534 }, workdir: '/' }));
    expect(res.stdout.toString()).toMatch(/^uid=65534\b.*gid=65534\b/);
  });

  it('exec: a cancel (the timeout) kills the whole process group, and the exit says so', async () => {
    const ac = new AbortController();
    const events: ExecEvent[] = [];
    const started = Date.now();
    let bg = 0;
    for await (const ev of client.exec(argv('sh', ['-c', 'sleep 60 & echo $!; wait']), ac.signal)) {
      events.push(ev);
      if (ev.stream === 'stdout' && !bg) {
        bg = Number(Buffer.from(ev.data).toString().trim());
        ac.abort();
      }
    }
    expect(bg).toBeGreaterThan(0);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(events[events.length - 1]).toEqual({ stream: 'exit', exit_code: 137 });
    await waitFor('the background sleep is killed', () => !running(bg), 5_000, 20);

    // The leader has exited, a background child still holds stdout (so no exit yet): a cancel kills it too.
    const ac2 = new AbortController();
    let orphan = 0;
    for await (const ev of client.exec(argv('sh', ['-c', 'sleep 60 & echo $!']), ac2.signal)) {
      if (ev.stream === 'stdout' && !orphan) {
        orphan = Number(Buffer.from(ev.data).toString().trim());
        await new Promise((r) => setTimeout(r, 200));
        ac2.abort();
      }
    }
    expect(orphan).toBeGreaterThan(0);
    await waitFor('the background child of an exited leader is killed', () => !running(orphan), 5_000, 20);
  });

  it('exec: a signal control reaches the group; a dropped connection kills the command', async () => {
    async function* controls() {
      await new Promise((r) => setTimeout(r, 200));
      yield { type: 'signal' as const, signal: 'SIGTERM' as const };
    }
    const res = await run(argv('sleep', ['60'], { controls: controls() }));
    expect(res.exitCode).toBe(128 + 15);

    const sock = await agent.raw();
    const reader = new FrameReader(sock, 'the agent');
    sock.write(encodeFrame({ op: 'exec', argv: ['sh', '-c', 'sleep 60 & echo $!; wait'], env: {}, cwd: dir }));
    const first = await reader.next(5_000);
    expect(first?.header.type).toBe('stdout');
    const bg = Number(first!.data.toString().trim());
    expect(running(bg)).toBe(true);
    sock.destroy();
    await waitFor('the command of a dropped connection is killed', () => !running(bg), 5_000, 20);
  });

  it('exec: output waits for a slow reader; the agent holds a bounded window, not the stream', async () => {
    const total = 64 * 1024 * 1024;
    const it = client.exec(argv('head', ['-c', String(total), '/dev/zero']), new AbortController().signal)[Symbol.asyncIterator]();
    let got = 0;
    let frames = 0;
    let peak = 0;
    let exit: number | undefined;
    for (;;) {
      const r = await it.next();
      if (r.done) break;
      if (r.value.stream === 'stdout') got += r.value.data.length;
      else if (r.value.stream === 'exit') exit = r.value.exit_code;
      // A reader slower than the command: the agent's queue never drains while the stream lasts.
      if (++frames % 16 === 0) {
        peak = Math.max(peak, peakKb());
        await new Promise((r) => setTimeout(r, 5));
      }
    }
    expect(got).toBe(total);
    expect(exit).toBe(0);
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(16 * 1024);
  });

  it('exec: several at once', async () => {
    const all = await Promise.all(Array.from({ length: 6 }, (_, i) => run(argv('sh', ['-c', `sleep 0.2; echo ${i}`]))));
    expect(all.map((r) => r.stdout.toString())).toEqual(['0\n', '1\n', '2\n', '3\n', '4\n', '5\n']);
  });

  it('files: write and read back all 256 byte values, and more than one frame of data', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await client.writeFile(join(dir, 'f', 'g', 'bytes.bin'), bytes, undefined);
    expect(Buffer.from(await client.readFile(join(dir, 'f', 'g', 'bytes.bin'))).equals(bytes)).toBe(true);
    expect(readFileSync(join(dir, 'f', 'g', 'bytes.bin')).equals(bytes)).toBe(true);
    expect((statSync(join(dir, 'f', 'g', 'bytes.bin')).mode & 0o7777).toString(8)).toBe('644');
    const big = randomBytes(9 * 1024 * 1024 + 7);
    await client.writeFile(join(dir, 'big2.bin'), big, 0o600);
    const opened = await client.openFile(join(dir, 'big2.bin'));
    expect(opened.size).toBe(big.length);
    const parts: Uint8Array[] = [];
    for await (const c of opened.body) parts.push(c);
    expect(parts.length).toBeGreaterThan(1);
    expect(Buffer.concat(parts).equals(big)).toBe(true);
    expect(await client.stat(join(dir, 'big2.bin'))).toMatchObject({ name: 'big2.bin', size: big.length, is_dir: false, mode: '0600' });
    // An existing file keeps its mode when the write names none; an empty file is fine.
    await client.writeFile(join(dir, 'big2.bin'), new Uint8Array(0), undefined);
    expect(await client.stat(join(dir, 'big2.bin'))).toMatchObject({ size: 0, mode: '0600' });
    expect((await client.readFile(join(dir, 'big2.bin'))).length).toBe(0);
  });

  it('files: read errors: missing, a directory, over max_bytes', async () => {
    expect((await failure(client.readFile(join(dir, 'nope')))).code).toBe('not_found');
    expect((await failure(client.readFile(dir))).code).toBe('bad_request');
    writeFileSync(join(dir, 'ten.txt'), '0123456789');
    const err = await failure(client.readFile(join(dir, 'ten.txt'), undefined, 5));
    expect(err.code).toBe('payload_too_large');
    expect(err.message).toContain('10 bytes');
    expect((await failure(client.writeFile(join(dir, 'sub dir'), Buffer.from('x'), undefined))).code).toBe('bad_request');
  });

  it('files: stat and list', async () => {
    const d = join(dir, 'listing');
    mkdirSync(join(d, 'zdir'), { recursive: true });
    writeFileSync(join(d, 'b.txt'), 'bb');
    writeFileSync(join(d, 'a "q".txt'), 'a');
    chmodSync(join(d, 'b.txt'), 0o640);
    const st = await client.stat(d);
    expect(st).toMatchObject({ name: 'listing', path: d, size: 0, is_dir: true, mode: '0755' });
    expect(Math.abs(Date.parse(st.mod_time) - statSync(d).mtimeMs)).toBeLessThan(1000);
    expect(st.mod_time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const entries = await client.listFiles(d);
    expect(entries.map((e) => [e.name, e.path, e.size, e.is_dir, e.mode])).toEqual([
      ['a "q".txt', join(d, 'a "q".txt'), 1, false, '0644'],
      ['b.txt', join(d, 'b.txt'), 2, false, '0640'],
      ['zdir', join(d, 'zdir'), 0, true, '0755'],
    ]);
    expect((await client.stat('/')).name).toBe('/');
    expect((await failure(client.stat(join(d, 'missing')))).code).toBe('not_found');
    expect((await failure(client.listFiles(join(d, 'b.txt')))).code).toBe('not_found');
    expect((await failure(client.stat('relative'))).code).toBe('bad_request');
    expect(await client.glob(join(d, '*.txt'))).toEqual([join(d, 'a "q".txt'), join(d, 'b.txt')]);
    // A listing is one header (at most 1 MiB): a few thousand entries fit, ten thousand do not.
    const many = join(dir, 'many');
    mkdirSync(many);
    for (let i = 0; i < 3000; i++) writeFileSync(join(many, `f${String(i).padStart(5, '0')}`), '');
    const listed = await client.listFiles(many);
    expect(listed.length).toBe(3000);
    expect(listed[2999]!.name).toBe('f02999');
    for (let i = 3000; i < 10_001; i++) writeFileSync(join(many, `f${String(i).padStart(5, '0')}`), '');
    expect((await failure(client.listFiles(many))).code).toBe('payload_too_large');
  });

  it('files: chmod, move (parents made), delete (recursive or refused)', async () => {
    const d = join(dir, 'ops');
    await client.writeFile(join(d, 'x.txt'), Buffer.from('x'), undefined);
    await client.chmod(join(d, 'x.txt'), 0o700);
    expect((await client.stat(join(d, 'x.txt'))).mode).toBe('0700');
    await client.moveFile(join(d, 'x.txt'), join(d, 'deep', 'er', 'y.txt'));
    expect(readFileSync(join(d, 'deep', 'er', 'y.txt'), 'utf8')).toBe('x');
    expect((await failure(client.moveFile(join(d, 'x.txt'), join(d, 'z.txt')))).code).toBe('not_found');
    expect((await failure(client.deleteFile(join(d, 'deep'), false))).code).toBe('bad_request');
    await client.deleteFile(join(d, 'deep'), true);
    expect((await failure(client.stat(join(d, 'deep')))).code).toBe('not_found');
    await client.deleteFile(d, false);
    expect((await failure(client.deleteFile(d, false))).code).toBe('not_found');
  });

  it('malformed frames close that connection only; the agent keeps serving', async () => {
    const bad: Buffer[] = [
      Buffer.from([0, 0x20, 0, 0, 0, 0, 0, 0]), // a 2 MiB header
      Buffer.from([0, 0, 0, 2, 0x7f, 0, 0, 0]), // a 2 GiB data part
      Buffer.concat([Buffer.from([0, 0, 0, 5, 0, 0, 0, 0]), Buffer.from('{nope')]),
      Buffer.concat([Buffer.from([0, 0, 0, 2, 0, 0, 0, 0]), Buffer.from('[]')]),
      Buffer.concat([Buffer.from([0, 0, 0, 3, 0, 0, 0, 0]), Buffer.from('"x"')]),
    ];
    for (const bytes of bad) {
      const sock = await agent.raw();
      const done = closed(sock);
      sock.write(bytes);
      await done;
      await expect(client.ping()).resolves.toBeUndefined();
    }
    // Half a frame, then the host goes away.
    const half = await agent.raw();
    half.end(Buffer.from([0, 0, 0, 40, 0, 0, 0, 0, 0x7b]));
    await closed(half);
    // An exec whose next frame is garbage: the connection closes and the command is killed.
    const sock = await agent.raw();
    const reader = new FrameReader(sock, 'the agent');
    sock.write(encodeFrame({ op: 'exec', argv: ['sh', '-c', 'sleep 60 & echo $!; wait'], env: {}, cwd: dir }));
    const first = await reader.next(5_000);
    const bg = Number(first!.data.toString().trim());
    const done = closed(sock);
    sock.write(Buffer.concat([Buffer.from([0, 0, 0, 1, 0, 0, 0, 0]), Buffer.from('x')]));
    await done;
    await waitFor('the command of a broken connection is killed', () => !running(bg), 5_000, 20);
    // A well-formed frame with an op the agent does not know: an error answer, not a hang.
    const err = await failure(
      agent
        .client()
        .ping()
        .then(() => client.deleteFile('relative', false)),
    );
    expect(err.code).toBe('bad_request');
    await expect(client.ping()).resolves.toBeUndefined();
  });

  it('garbage headers (random bytes, deep nesting, broken escapes) get a close or an error, never a hang', async () => {
    const headers: Buffer[] = [
      Buffer.from(`${'['.repeat(100_000)}${']'.repeat(100_000)}`),
      Buffer.from('{"op":"stat","path":"\\ud800\\u"}'),
      Buffer.from('{"op":"stat","path":"/\\ud83d\\ude00"}'),
      Buffer.from('{"op":"exec","argv":["true"],"env":{"A":"b"},"uid":1e400}'),
      Buffer.from('{"op":"read","path":"/","max_bytes":-1}'),
      Buffer.from('{"op":"write","path":"/x","mode":"0644"}'),
    ];
    for (let i = 0; i < 40; i++) headers.push(randomBytes(1 + ((i * 37) % 300)));
    for (let i = 0; i < 40; i++) {
      const j = Buffer.from(JSON.stringify({ op: ['ping', 'stat', 'list', 'exec', 'read'][i % 5], path: '/', argv: ['true'] }));
      headers.push(Buffer.concat([j.subarray(0, (i * 7) % j.length), randomBytes(3), j.subarray((i * 7) % j.length)]));
    }
    for (const h of headers) {
      const sock = await agent.raw();
      const reader = new FrameReader(sock, 'the agent');
      const prefix = Buffer.alloc(8);
      prefix.writeUInt32BE(h.length, 0);
      sock.write(Buffer.concat([prefix, h]));
      // Either an answer (error, or ok for what happens to parse) or a closed connection: within the deadline.
      const f = await reader.next(5_000).catch(() => null);
      if (f) expect(['error', 'ok', 'file', 'stdout', 'stderr', 'exit']).toContain(f.header.type);
      sock.destroy();
    }
    await expect(client.ping()).resolves.toBeUndefined();
    expect(agent.proc.exitCode).toBeNull();
  });

  it('unknown ops and missing fields are bad_request answers', async () => {
    const ask = async (header: Record<string, unknown>) => {
      const sock = await agent.raw();
      const reader = new FrameReader(sock, 'the agent');
      sock.write(encodeFrame(header));
      const f = await reader.next(5_000);
      sock.destroy();
      return f?.header;
    };
    expect(await ask({ op: 'frobnicate' })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await ask({ nope: 1 })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await ask({ op: 'exec', argv: [] })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await ask({ op: 'exec', argv: ['true'], env: { A: 1 } })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await ask({ op: 'chmod', path: dir, mode: 99999 })).toMatchObject({ type: 'error', code: 'bad_request' });
    expect(await ask({ op: 'stat', path: 'x\u0000y' })).toMatchObject({ type: 'error', code: 'bad_request' });
  });
});
