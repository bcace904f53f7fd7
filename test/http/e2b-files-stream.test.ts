import { Sandbox } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envdSdkFor } from '../helpers/e2b-sdk.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { waitFor } from '../helpers/wait.js';

/**
 * envd's multipart `/files` upload streams (DESIGN.md §14): each part is written into the sandbox as
 * it arrives — the first file is there while the request body is still open — and a body that
 * breaks off mid-part is a 400, never a hang. Real server, real port, mock provider.
 */
const B = 'streamBoundary42';

describe('E2B multipart uploads stream', () => {
  let srv: TestServer;
  let sbx: Sandbox;
  const requested: string[] = [];
  beforeAll(async () => {
    srv = await startTestServer();
    sbx = await Sandbox.create({ ...envdSdkFor(srv.url, requested) });
  });
  afterAll(async () => {
    await sbx?.kill();
    await srv?.close();
  });

  const part = (path: string, data: string | Buffer) =>
    Buffer.concat([
      Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="${path}"\r\n\r\n`),
      Buffer.from(data),
      Buffer.from('\r\n'),
    ]);
  const upload = (body: ReadableStream<Uint8Array>) =>
    fetch(`${srv.url}/e2b/sandbox/files`, {
      method: 'POST',
      headers: { 'content-type': `multipart/form-data; boundary=${B}`, 'e2b-sandbox-id': sbx.sandboxId, 'e2b-sandbox-port': '49983' },
      body,
      duplex: 'half',
    } as RequestInit);
  const exists = (path: string) => sbx.files.exists(path);

  it('the first file is in the sandbox before the body has ended', async () => {
    const big = Buffer.alloc(3 * 1024 * 1024, 0x5a);
    let push!: (b: Buffer | null) => void;
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        push = (b) => (b ? c.enqueue(b) : c.close());
      },
    });
    const answer = upload(body);
    push(part('/workspace/first.bin', big));
    // The next boundary ends the first part; the second part's body is not sent yet.
    push(Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="file"; filename="/workspace/second.txt"\r\n\r\nsec`));
    await waitFor('the first part written while the body is still open', () => exists('/workspace/first.bin'), 20_000);
    expect(await exists('/workspace/second.txt')).toBe(false);
    push(Buffer.from(`ond\r\n--${B}--\r\n`));
    push(null);
    const res = await answer;
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([
      { name: 'first.bin', type: 'file', path: '/workspace/first.bin' },
      { name: 'second.txt', type: 'file', path: '/workspace/second.txt' },
    ]);
    expect((await sbx.files.read('/workspace/first.bin', { format: 'bytes' })).byteLength).toBe(big.length);
    expect(await sbx.files.read('/workspace/second.txt')).toBe('second');
  });

  it('a body that breaks off inside a part, or has no file part, is a 400', async () => {
    const cut = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(part('/workspace/cut.txt', 'never ends').subarray(0, -2));
        c.close();
      },
    });
    const res = await upload(cut);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { message: string }).message).toMatch(/ended inside a part/);
    const none = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="other"\r\n\r\nx\r\n--${B}--\r\n`));
        c.close();
      },
    });
    const res2 = await upload(none);
    expect(res2.status).toBe(400);
    expect(((await res2.json()) as { message: string }).message).toMatch(/no `file` part/);
  });
});
