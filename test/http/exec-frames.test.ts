/**
 * The binary exec stream (DESIGN.md §11, issue 33): `Accept: application/octet-stream` on a streamed
 * exec answers frames (1 byte stream id, 4 bytes length, bytes) ending in one exit frame; the typed
 * client reads them byte-exact, and reads an NDJSON answer the same way. Against a real server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '../../src/client/index.js';
import { type ExecBytesChunk, parseExecFrames } from '../../src/client/exec-frames.js';
import { EXEC_FRAME } from '../../src/contracts/exec-frames.js';
import { binaryExecFrames } from '../../src/transports/http/exec-binary.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/** Every byte value, twice, then text. */
const ALL_BYTES = Buffer.concat([
  Buffer.from(Array.from({ length: 256 }, (_, i) => i)),
  Buffer.from(Array.from({ length: 256 }, (_, i) => 255 - i)),
]);
const PRINTF_ALL = `printf '${[...ALL_BYTES].map((b) => `\\${b.toString(8).padStart(3, '0')}`).join('')}'`;

function frame(id: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(5);
  h[0] = id;
  h.writeUInt32BE(payload.byteLength, 1);
  return Buffer.concat([h, payload]);
}

async function collect(it: AsyncIterable<ExecBytesChunk>) {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let exit: Extract<ExecBytesChunk, { stream: 'exit' }> | undefined;
  for await (const c of it) {
    if (c.stream === 'exit') exit = c;
    else (c.stream === 'stdout' ? out : err).push(Buffer.from(c.data));
  }
  return { stdout: Buffer.concat(out), stderr: Buffer.concat(err), exit };
}

describe('binary exec frames, over HTTP', () => {
  let server: TestServer;
  let client: Client;
  let id: string;
  beforeAll(async () => {
    server = await startTestServer();
    client = new Client({ url: server.url });
    id = (await client.spawn({})).id;
  });
  afterAll(async () => {
    await client?.close();
    await server?.close();
  });

  it('answers frames with every byte value as sent, and an exit frame', async () => {
    const res = await fetch(`${server.url}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/octet-stream' },
      body: JSON.stringify({ command: `${PRINTF_ALL}; ${PRINTF_ALL} >&2; exit 3`, stream: true }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const raw = Buffer.from(await res.arrayBuffer());
    // Walk the frames by hand: the layout is the contract.
    const seen: Array<{ id: number; payload: Buffer }> = [];
    for (let at = 0; at < raw.byteLength; ) {
      const len = raw.readUInt32BE(at + 1);
      seen.push({ id: raw[at]!, payload: raw.subarray(at + 5, at + 5 + len) });
      at += 5 + len;
    }
    const bytes = (sid: number) => Buffer.concat(seen.filter((f) => f.id === sid).map((f) => f.payload));
    expect(bytes(EXEC_FRAME.stdout)).toEqual(ALL_BYTES);
    expect(bytes(EXEC_FRAME.stderr)).toEqual(ALL_BYTES);
    const last = seen.at(-1)!;
    expect(last.id).toBe(EXEC_FRAME.exit);
    expect(JSON.parse(last.payload.toString())).toMatchObject({ exit_code: 3 });
    expect(seen.filter((f) => f.id === EXEC_FRAME.exit)).toHaveLength(1);
  });

  it('without the Accept header the stream stays NDJSON', async () => {
    const res = await fetch(`${server.url}/api/v1/sandboxes/${id}/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ command: 'echo hi', stream: true }),
    });
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(JSON.parse((await res.text()).trim())).toEqual({ stream: 'stdout', data: 'hi\n' });
  });

  it('an unknown sandbox is still a JSON 404 before any frame', async () => {
    const res = await fetch(`${server.url}/api/v1/sandboxes/sb-nosuch/exec`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/octet-stream' },
      body: JSON.stringify({ command: 'true', stream: true }),
    });
    expect(res.status).toBe(404);
    expect(((await res.json()) as { code: string }).code).toBe('not_found');
  });

  it('the typed client reads the frames byte-exact; a deadline is a timed-out exit', async () => {
    const r = await collect(client.execBytes(id, { command: `${PRINTF_ALL}; echo err >&2; exit 5` }));
    expect(r.stdout).toEqual(ALL_BYTES);
    expect(r.stderr.toString()).toBe('err\n');
    expect(r.exit).toMatchObject({ stream: 'exit', exit_code: 5 });
    const t = await collect(client.execBytes(id, { command: 'sleep 5', timeout: '1s' }));
    expect(t.exit).toMatchObject({ exit_code: 124, timed_out: true });
  });
});

describe('the frame reader', () => {
  const stream = Buffer.concat([
    frame(EXEC_FRAME.stdout, Buffer.from([0, 1, 2, 255])),
    frame(EXEC_FRAME.stderr, Buffer.from('oops')),
    frame(EXEC_FRAME.stdout, Buffer.alloc(0)),
    frame(EXEC_FRAME.exit, Buffer.from(JSON.stringify({ exit_code: 7, duration: '1ms' }))),
  ]);

  it('reads the same items however the bytes are cut into chunks', async () => {
    const whole = await collect(
      parseExecFrames(
        (async function* () {
          yield stream;
        })(),
      ),
    );
    expect(whole.stdout).toEqual(Buffer.from([0, 1, 2, 255]));
    expect(whole.stderr.toString()).toBe('oops');
    expect(whole.exit).toEqual({ stream: 'exit', exit_code: 7, duration: '1ms' });
    for (let cut = 1; cut < stream.byteLength; cut++) {
      const parts = [stream.subarray(0, cut), stream.subarray(cut)];
      expect(
        await collect(
          parseExecFrames(
            (async function* () {
              yield* parts;
            })(),
          ),
        ),
      ).toEqual(whole);
    }
    const bytewise = (async function* () {
      for (const b of stream) yield Buffer.from([b]);
    })();
    expect(await collect(parseExecFrames(bytewise))).toEqual(whole);
  });

  it('the server writer: small output joined with its header, big output as header then bytes, both read back exact', async () => {
    const small = Buffer.from('small\n');
    const big = Buffer.alloc(300 * 1024, 7);
    const writes: Uint8Array[] = [];
    for await (const w of binaryExecFrames(
      (async function* () {
        yield { stream: 'stdout' as const, data: small };
        yield { stream: 'stderr' as const, data: big };
        yield { stream: 'stdout' as const, data: Buffer.alloc(0) };
        yield { stream: 'exit' as const, exit_code: 3, duration_ms: 1500, timed_out: false };
      })(),
    ))
      writes.push(w);
    // One buffer for the small frame; the big one's bytes are the very buffer the provider gave.
    expect(writes.map((w) => w.byteLength)).toEqual([5 + small.byteLength, 5, big.byteLength, writes[3]!.byteLength]);
    expect(writes[2]).toBe(big);
    const read = await collect(
      parseExecFrames(
        (async function* () {
          yield* writes;
        })(),
      ),
    );
    expect(read.stdout).toEqual(small);
    expect(read.stderr).toEqual(big);
    expect(read.exit).toMatchObject({ stream: 'exit', exit_code: 3, duration: '1.5s' });
  });

  it('an error frame is an exit 125 with the error; a cut-off or unknown frame is an error', async () => {
    const err = frame(EXEC_FRAME.error, Buffer.from(JSON.stringify({ code: 'provider_error', message: 'exec failed' })));
    expect(
      (
        await collect(
          parseExecFrames(
            (async function* () {
              yield err;
            })(),
          ),
        )
      ).exit,
    ).toEqual({
      stream: 'exit',
      exit_code: 125,
      error: { code: 'provider_error', message: 'exec failed' },
    });
    await expect(
      collect(
        parseExecFrames(
          (async function* () {
            yield stream.subarray(0, 7);
          })(),
        ),
      ),
    ).rejects.toThrow(/inside a frame/);
    await expect(
      collect(
        parseExecFrames(
          (async function* () {
            yield frame(9, Buffer.from('x'));
          })(),
        ),
      ),
    ).rejects.toThrow(/stream id 9/);
  });
});
