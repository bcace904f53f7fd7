/** `sbx exec` and `sbx shell` write the command's output byte for byte, whatever the bytes. */
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

const RAW_SCRIPT = 'printf "\\000\\377\\376 raw\\303"';
const RAW = Buffer.from([0x00, 0xff, 0xfe, 0x20, 0x72, 0x61, 0x77, 0xc3]);

/** A pretend terminal on stdin. */
function ttyStdin() {
  const stream = new PassThrough() as PassThrough & { isTTY: boolean; setRawMode: (on: boolean) => unknown };
  stream.isTTY = true;
  stream.setRawMode = () => stream;
  return stream;
}

function suite(title: string, overrides: () => Promise<Record<string, unknown>>) {
  describe(title, () => {
    let server: TestServer;
    let sbx: ReturnType<typeof sbxAt>;
    let id: string;
    beforeAll(async () => {
      server = await startTestServer(await overrides());
      sbx = sbxAt(server.url);
      id = (await sbx(['spawn'])).stdout.trim();
    });
    afterAll(async () => {
      if (id) await sbx(['rm', id]).catch(() => undefined);
      await server?.close();
    });

    it('the NDJSON path (no -i) writes stdout and stderr bytes exactly', async () => {
      const r = await sbx(['exec', '--sh', id, `${RAW_SCRIPT}; ${RAW_SCRIPT} >&2; printf ' then text é\\n'`]);
      expect(r.code).toBe(0);
      expect(r.stdoutBytes).toEqual(Buffer.concat([RAW, Buffer.from(' then text é\n')]));
      expect(r.stderrBytes).toEqual(RAW);
    });

    it('the WebSocket path (-i, piped stdin) writes stdout and stderr bytes exactly', async () => {
      const r = await sbx(['exec', '-i', '--sh', id, `cat; ${RAW_SCRIPT} >&2`], { stdin: RAW });
      expect(r.code).toBe(0);
      expect(r.stdoutBytes).toEqual(RAW);
      expect(r.stderrBytes).toEqual(RAW);
    });

    it('a binary file piped through `sbx exec -- cat` arrives identical', async () => {
      const content = randomBytes(300 * 1024);
      const b64 = content.toString('base64');
      // Written through the API so the bytes are known exactly; read relative to the default workdir
      // (the mock provider roots sandbox paths in a host directory).
      const res = await fetch(`${server.url}/api/v1/sandboxes/${id}/files`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ path: '/workspace/blob.bin', content: b64, encoding: 'base64' }),
      });
      expect(res.status).toBe(200);
      for (const args of [
        ['exec', id, '--', 'cat', 'blob.bin'],
        ['exec', '-i', id, 'cat', 'blob.bin'],
      ]) {
        const r = await sbx(args);
        expect(r.code, args.join(' ')).toBe(0);
        expect(r.stdoutBytes.equals(content), args.join(' ')).toBe(true);
      }
    });

    it('--json marks a stdout that is not UTF-8 as base64', async () => {
      const r = await sbx(['--json', 'exec', '--sh', id, `${RAW_SCRIPT}; echo text >&2`]);
      expect(r.code).toBe(0);
      const result = JSON.parse(r.stdout);
      expect(result).toMatchObject({ exit_code: 0, stdout_encoding: 'base64', stderr: 'text\n' });
      expect(Buffer.from(result.stdout, 'base64')).toEqual(RAW);
    });

    it('sbx shell writes the bytes exactly', async () => {
      const r = await sbx(['shell', id, '--sh', RAW_SCRIPT], { stdinStream: ttyStdin(), tty: true });
      expect(r.code).toBe(0);
      expect(r.stdoutBytes).toEqual(RAW);
    });
  });
}

suite('byte-exact sbx exec and shell (mock provider)', async () => ({}));

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('docker provider'), () => {
  suite('byte-exact sbx exec and shell (docker provider)', async () => {
    await requireEngine();
    return { providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } };
  });
});
