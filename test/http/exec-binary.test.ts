/**
 * Byte-exact exec output (the sbx `binary` extension), exec timeouts longer than one Node timer,
 * and a bad workdir answered with a status on every exec path.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startWs, type WsMessage } from '../helpers/ws.js';

/** Bytes that are not UTF-8 (NUL is, 0xff 0xfe are not), then text, then a lone lead byte at the very end. */
const RAW_SCRIPT = 'printf "\\000\\377\\376 raw\\303"';
const RAW = Buffer.from([0x00, 0xff, 0xfe, 0x20, 0x72, 0x61, 0x77, 0xc3]);
/** What a client without `binary` gets: every bad byte replaced by U+FFFD. */
const RAW_AS_TEXT = '\u0000\ufffd\ufffd raw\ufffd';
/** A euro sign (e2 82 ac) whose bytes leave the command in two writes. */
const SPLIT_SCRIPT = "printf 'price: \\342\\202'; sleep 0.3; printf '\\254 ok\\n'";

interface Chunk {
  stream?: string;
  type?: string;
  data: string;
  encoding?: string;
  [k: string]: unknown;
}

/** The bytes of one stream out of NDJSON chunks or WebSocket messages. */
function bytesOf(chunks: Chunk[], stream: 'stdout' | 'stderr'): Buffer {
  const mine = chunks.filter((c) => (c.stream ?? c.type) === stream);
  return Buffer.concat(mine.map((c) => (c.encoding === 'base64' ? Buffer.from(c.data, 'base64') : Buffer.from(c.data, 'utf8'))));
}

const lines = (text: string): Chunk[] =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Chunk);

/** The same checks against the mock and the docker provider. */
function binarySuite(title: string, setup: () => Promise<{ srv: TestServer; id: string }>, teardown: () => Promise<void>) {
  describe(title, () => {
    let srv: TestServer;
    let id: string;
    beforeAll(async () => {
      ({ srv, id } = await setup());
    });
    afterAll(teardown);
    const exec = (body: Record<string, unknown>) => call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, body);

    it('NDJSON with binary: stdout and stderr bytes arrive exactly; text chunks stay plain strings', async () => {
      const res = await exec({
        command: `${RAW_SCRIPT}; ${RAW_SCRIPT} >&2; sleep 0.2; echo text; echo more >&2`,
        stream: true,
        binary: true,
        exit_record: true,
      });
      expect(res.status).toBe(200);
      const chunks = lines(res.text);
      expect(bytesOf(chunks, 'stdout').equals(Buffer.concat([RAW, Buffer.from('text\n')]))).toBe(true);
      expect(bytesOf(chunks, 'stderr').equals(Buffer.concat([RAW, Buffer.from('more\n')]))).toBe(true);
      expect(chunks.some((c) => c.encoding === 'base64')).toBe(true);
      // The unfinished character went out with the bad bytes: text after them travels as text.
      expect(chunks.filter((c) => c.stream === 'stdout').at(-1)).toEqual({ stream: 'stdout', data: 'text\n' });
      expect(chunks.filter((c) => c.stream === 'stderr').at(-1)).toEqual({ stream: 'stderr', data: 'more\n' });
      expect(chunks.at(-1)).toMatchObject({ stream: 'exit', exit_code: 0 });
    });

    it('NDJSON without binary is spec-strict: plain strings, bad bytes as U+FFFD, no encoding field', async () => {
      const res = await exec({ command: RAW_SCRIPT, stream: true });
      const chunks = lines(res.text);
      expect(chunks.every((c) => Object.keys(c).sort().join() === 'data,stream')).toBe(true);
      expect(chunks.map((c) => c.data).join('')).toBe(RAW_AS_TEXT);
    });

    it('a character split across chunks still arrives as text', async () => {
      const res = await exec({ command: SPLIT_SCRIPT, stream: true, binary: true });
      const chunks = lines(res.text);
      expect(chunks.length).toBeGreaterThan(1);
      expect(chunks.every((c) => c.encoding === undefined)).toBe(true);
      expect(chunks.map((c) => c.data).join('')).toBe('price: \u20ac ok\n');
    });

    it('WebSocket with binary: the same bytes, base64 messages marked', async () => {
      const c = await startWs(srv.url, id, { command: `${RAW_SCRIPT}; ${RAW_SCRIPT} >&2; sleep 0.2; echo text`, binary: true });
      const msgs = (await c.rest()) as WsMessage[] as Chunk[];
      expect(bytesOf(msgs, 'stdout').equals(Buffer.concat([RAW, Buffer.from('text\n')]))).toBe(true);
      expect(bytesOf(msgs, 'stderr').equals(RAW)).toBe(true);
      expect(msgs.find((m) => m.data === 'text\n')).toEqual({ type: 'stdout', data: 'text\n' });
      expect(msgs.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
      const split = (await (await startWs(srv.url, id, { command: SPLIT_SCRIPT, binary: true })).rest()) as Chunk[];
      expect(split.every((m) => m.encoding === undefined)).toBe(true);
      expect(bytesOf(split, 'stdout').toString()).toBe('price: \u20ac ok\n');
    });

    it('WebSocket without binary keeps plain text messages', async () => {
      const msgs = (await (await startWs(srv.url, id, { command: RAW_SCRIPT })).rest()) as Chunk[];
      expect(
        msgs
          .filter((m) => m.type === 'stdout')
          .map((m) => m.data)
          .join(''),
      ).toBe(RAW_AS_TEXT);
      expect(msgs.every((m) => m.encoding === undefined)).toBe(true);
    });

    it('buffered with binary: a stream that is not UTF-8 comes base64 with its *_encoding field', async () => {
      const res = await exec({ command: `${RAW_SCRIPT}; echo fine >&2`, binary: true });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ exit_code: 0, stdout_encoding: 'base64', stderr: 'fine\n' });
      expect(res.body.stderr_encoding).toBeUndefined();
      expect(Buffer.from(res.body.stdout, 'base64').equals(RAW)).toBe(true);
      const plain = await exec({ command: RAW_SCRIPT });
      expect(plain.body.stdout).toBe(RAW_AS_TEXT);
      expect(plain.body.stdout_encoding).toBeUndefined();
    });

    it('a bad workdir is 400 before a stream starts, as buffered and over the WebSocket', async () => {
      const message = 'workdir /nonexist is not an existing directory in the sandbox';
      const buffered = await exec({ command: 'pwd', workdir: '/nonexist' });
      expect(buffered.status).toBe(400);
      expect(buffered.body).toEqual({ code: 'bad_request', message });
      const streamed = await exec({ command: 'pwd', workdir: '/nonexist', stream: true, exit_record: true });
      expect(streamed.status).toBe(400);
      expect(streamed.headers.get('content-type')).toContain('application/json');
      expect(streamed.body).toEqual({ code: 'bad_request', message });
      expect(await (await startWs(srv.url, id, { command: 'pwd', workdir: '/nonexist' })).rest()).toEqual([
        { type: 'error', code: 'bad_request', message },
      ]);
      // A file is not a directory either.
      expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/files`, { path: '/workspace/plain-file', content: 'x' })).status).toBe(
        200,
      );
      const onFile = await exec({ command: 'pwd', workdir: '/workspace/plain-file', stream: true });
      expect(onFile.status).toBe(400);
      expect(onFile.body.message).toBe('workdir /workspace/plain-file is not an existing directory in the sandbox');
      // An existing directory streams as before.
      const ok = await exec({ command: 'pwd', workdir: '/tmp', stream: true, exit_record: true });
      expect(ok.status).toBe(200);
      expect(lines(ok.text)[0]!.data).toMatch(/\/tmp\n$/);
    });
  });
}

let mock: TestServer | undefined;
binarySuite(
  'byte-exact exec output (mock provider)',
  async () => {
    mock = await startTestServer();
    return { srv: mock, id: (await call(mock.url, 'POST', '/api/v1/sandboxes')).body.id };
  },
  async () => mock?.close(),
);

let docker: TestServer | undefined;
let dockerId: string | undefined;
describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider'), () => {
  binarySuite(
    'byte-exact exec output (docker provider)',
    async () => {
      await requireEngine();
      docker = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
      const spawn = await call(docker.url, 'POST', '/api/v1/sandboxes');
      expect(spawn.status).toBe(201);
      dockerId = spawn.body.id;
      return { srv: docker, id: dockerId! };
    },
    async () => {
      if (docker && dockerId) await call(docker.url, 'DELETE', `/api/v1/sandboxes/${dockerId}`).catch(() => undefined);
      await docker?.close();
    },
  );
});

describe('buffered output limit', () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    // 104 bytes per stream.
    srv = await startTestServer({ defaults: { max_exec_output_mb: 0.0001 } });
    id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
  });
  afterAll(async () => srv?.close());

  it('cuts at a character boundary and says how many bytes were dropped', async () => {
    // 103 ASCII bytes, then euro signs: the 104th byte is the first of a three-byte character.
    const res = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, {
      command: "printf '%0103d' 0; printf '\\342\\202\\254%.0s' 1 2 3 4",
      binary: true,
    });
    expect(res.status).toBe(200);
    expect(res.body.truncated).toBe(true);
    expect(res.body.stdout_encoding).toBeUndefined();
    expect(res.body.stdout).toBe(`${'0'.repeat(103)}\n[sbx: output truncated, 12 bytes dropped]\n`);
  });
});

describe('exec timeouts longer than a Node timer holds (2^31-1 ms)', () => {
  let srv: TestServer;
  let id: string;
  const warnings: string[] = [];
  const onWarning = (w: Error) => warnings.push(w.name);
  beforeAll(async () => {
    process.on('warning', onWarning);
    srv = await startTestServer({ defaults: { max_exec_timeout: '0s' } });
    id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
  });
  afterAll(async () => {
    process.off('warning', onWarning);
    await srv?.close();
  });

  it('runs the command instead of timing out at once, buffered, streamed and over the WebSocket', async () => {
    const body = { command: 'sleep 0.2; echo hi', timeout: '800000h' };
    const buffered = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, body);
    expect(buffered.status).toBe(200);
    expect(buffered.body).toMatchObject({ exit_code: 0, stdout: 'hi\n' });
    const streamed = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { ...body, stream: true, exit_record: true });
    expect(lines(streamed.text)).toEqual([{ stream: 'stdout', data: 'hi\n' }, expect.objectContaining({ stream: 'exit', exit_code: 0 })]);
    const ws = (await (await startWs(srv.url, id, body)).rest()) as Chunk[];
    expect(ws.at(-1)).toMatchObject({ type: 'exit', exit_code: 0 });
    await new Promise((r) => setImmediate(r));
    expect(warnings).not.toContain('TimeoutOverflowWarning');
    expect(srv.plane.deps.bus.recent({ sandbox_id: id }).map((e) => e.type)).not.toContain('exec.timeout');
  });
});
