import { createServer, connect, type Server, type Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
let id: string;

beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
  id = (await sbx(['spawn'])).stdout.trim();
});
afterAll(async () => {
  await server?.close();
});

describe('sbx exec', () => {
  it.each([0, 1, 42])('passes exit code %i through', async (code) => {
    const r = await sbx(['exec', id, '--', 'sh', '-c', `exit ${code}`]);
    expect(r.code).toBe(code);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe('');
  });

  it('keeps stdout and stderr apart, byte for byte', async () => {
    const script = "printf 'out-1\\n'; printf 'err-1\\n' >&2; printf 'tab\\there  é ✓\\n'; printf 'no newline' >&2; printf 'last'";
    const r = await sbx(['exec', id, '--', 'sh', '-c', script]);
    expect(r.code).toBe(0);
    expect(r.stdoutBytes.equals(Buffer.from('out-1\ntab\there  é ✓\nlast'))).toBe(true);
    expect(r.stderrBytes.equals(Buffer.from('err-1\nno newline'))).toBe(true);
  });

  it('runs argv without a shell: arguments arrive verbatim', async () => {
    const r = await sbx(['exec', id, '--', 'printf', '%s|', 'a b', '$HOME', "it's", '*']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("a b|$HOME|it's|*|");
  });

  it('--sh runs a shell script; --env and --workdir apply', async () => {
    const r = await sbx([
      'exec',
      '--env',
      'GREETING=hi there',
      '--env',
      'N=2',
      '--workdir',
      '/tmp',
      '--sh',
      id,
      'echo "$GREETING $N"; pwd',
    ]);
    expect(r.code).toBe(0);
    // The mock provider roots sandbox paths in a host directory; the workdir is its /tmp.
    expect(r.stdout).toMatch(/^hi there 2\n(.*\/)?tmp\n$/);
  });

  it('exits 124 when the command hits --timeout, and says so on stderr', async () => {
    const started = Date.now();
    const r = await sbx(['exec', '--timeout', '1s', id, '--', 'sh', '-c', 'echo started; sleep 10']);
    expect(r.code).toBe(124);
    expect(r.stdout).toBe('started\n');
    expect(r.stderr).toMatch(/time/i);
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('sends piped stdin to the command with -i (binary-safe); without -i it does not', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 10, 0x80, 65]);
    const r = await sbx(['exec', '-i', id, '--', 'od', '-An', '-tu1'], { stdin: bytes });
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split(/\s+/).map(Number)).toEqual([0, 1, 2, 255, 10, 128, 65]);
    const text = await sbx(['exec', '--interactive', id, 'cat'], { stdin: 'line one\nline two\n' });
    expect(text.stdout).toBe('line one\nline two\n');
    const skipped = await sbx(['exec', id, 'sh', '-c', 'cat; echo done'], { stdin: 'ignored' });
    expect(skipped.stdout).toBe('done\n');
  });

  it('--json prints the buffered result and exits with its code', async () => {
    const r = await sbx(['--json', 'exec', id, '--', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect(r.code).toBe(3);
    const result = JSON.parse(r.stdout);
    expect(result).toMatchObject({ exit_code: 3, stdout: 'out\n', stderr: 'err\n' });
    expect(typeof result.duration).toBe('string');
    const slow = await sbx(['--json', 'exec', '--timeout', '1s', id, '--', 'sh', '-c', 'echo partial; sleep 10']);
    expect(slow.code).toBe(124);
    expect(JSON.parse(slow.stdout)).toMatchObject({ exit_code: 124, timed_out: true });
  });

  it('exits 125 for every failure of sbx itself before the command starts', async () => {
    const missing = await sbx(['exec', 'sb-nope', '--', 'true']);
    expect(missing.code).toBe(125);
    expect(missing.stderr).toBe('sbx: sandbox sb-nope not found\n');
    const tooLong = await sbxAt(server.url)(['exec', '--timeout', '100h', id, '--', 'true']);
    expect(tooLong.code).toBe(125);
    expect(tooLong.stderr).toMatch(/^sbx: .*timeout.*\n$/i);
    const unreachable = await sbxAt('http://127.0.0.1:9')(['exec', id, '--', 'true']);
    expect(unreachable.code).toBe(125);
    expect(unreachable.stderr).toContain('http://127.0.0.1:9');
    // Bad usage of exec is 125 too: an unknown option before the id, no command, a missing id.
    const unknown = await sbx(['exec', '--bogus', id, 'true']);
    expect(unknown.code).toBe(125);
    expect(unknown.stderr).toMatch(/^sbx: unknown option '--bogus'/);
    const noCommand = await sbx(['exec', id]);
    expect(noCommand.code).toBe(125);
    expect(noCommand.stderr).toBe('sbx: exec needs a command after the id: sbx exec [options] ID CMD [ARG...]\n');
    expect((await sbx(['exec'])).code).toBe(125);
    // Other commands keep their codes.
    expect((await sbx(['get', 'sb-nope'])).code).toBe(4);
  });

  it('exits 125 when the connection breaks while the command runs', async () => {
    // A TCP proxy in front of the real server that cuts the connection once output has started.
    const upstream = new URL(server.url);
    const sockets: Socket[] = [];
    const proxy = createServer((client) => {
      const up = connect(Number(upstream.port), upstream.hostname);
      sockets.push(client, up);
      client.pipe(up);
      up.on('data', (d: Buffer) => {
        client.write(d);
        // Once the output is on the wire: binary frames, NDJSON chunks and WebSocket frames alike.
        if (d.toString().includes('begun')) setTimeout(() => (client.destroy(), up.destroy()), 50);
      });
      client.on('error', () => undefined);
      up.on('error', () => undefined);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    const port = (proxy.address() as { port: number }).port;
    const r = await sbxAt(`http://127.0.0.1:${port}`)(['exec', id, '--', 'sh', '-c', 'echo begun; sleep 5; echo never']);
    for (const s of sockets) s.destroy();
    proxy.close();
    expect(r.code).toBe(125);
    expect(r.stdout).toBe('begun\n');
    expect(r.stderr).toMatch(/^sbx: exec failed while the command ran: .+\n$/);
  });

  it('the connection breaking on the HTTP stream path (no -i) is 125 too', async () => {
    const upstream = new URL(server.url);
    const sockets: Socket[] = [];
    const proxy = createServer((client) => {
      const up = connect(Number(upstream.port), upstream.hostname);
      sockets.push(client, up);
      client.pipe(up);
      up.on('data', (d: Buffer) => {
        client.write(d);
        if (d.toString().includes('begun')) setTimeout(() => (client.destroy(), up.destroy()), 50);
      });
      client.on('error', () => undefined);
      up.on('error', () => undefined);
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    const port = (proxy.address() as { port: number }).port;
    const r = await sbxAt(`http://127.0.0.1:${port}`)(['exec', id, '--', 'sh', '-c', 'echo begun; sleep 5; echo never']);
    for (const s of sockets) s.destroy();
    proxy.close();
    expect(r.code).toBe(125);
    expect(r.stdout).toBe('begun\n');
  });
});

describe('sbx exec with live stdin', () => {
  it('streams piped stdin: the command answers a line before stdin closes', async () => {
    const stdin = new PassThrough();
    let answeredBeforeEof = false;
    const guard = setTimeout(() => stdin.end(), 8_000);
    const run = sbx(['exec', '-i', '--sh', id, 'read line; echo "got:$line"; cat; echo end'], {
      stdinStream: stdin,
      onStdout: (_chunk, all) => {
        if (all().includes('got:hello') && !answeredBeforeEof && !stdin.writableEnded) {
          answeredBeforeEof = true;
          stdin.write('more\n');
          setTimeout(() => stdin.end(), 100);
        }
      },
    });
    stdin.write('hello\n');
    const r = await run;
    clearTimeout(guard);
    expect(answeredBeforeEof).toBe(true);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('got:hello\nmore\nend\n');
    expect(r.stderr).toBe('');
  });

  it('the command starts at once: an open stdin pipe does not hold it', async () => {
    const stdin = new PassThrough();
    const started = Date.now();
    const r = await sbx(['exec', '-i', id, '--', 'sh', '-c', 'echo hi; exit 4'], { stdinStream: stdin });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(r).toMatchObject({ code: 4, stdout: 'hi\n' });
    expect(stdin.writableEnded).toBe(false);
    stdin.end();
  });

  it('without -i stdin is never read, piped or not', async () => {
    for (const argv of [
      ['exec', id, '--', 'sh', '-c', 'cat; echo done'],
      ['exec', id, 'sh', '-c', 'cat; echo done'],
      ['--json', 'exec', id, 'sh', '-c', 'cat; echo done'],
    ]) {
      const stdin = new PassThrough();
      stdin.write('must not arrive\n');
      const r = await sbx(argv, { stdinStream: stdin });
      expect(r.code, argv.join(' ')).toBe(0);
      expect(r.stdout).toContain('done');
      expect(r.stdout).not.toContain('must not arrive');
      expect(stdin.readableLength, `${argv.join(' ')}: stdin left unread`).toBe('must not arrive\n'.length);
      stdin.end();
    }
  });

  it('timeouts and errors before the start keep their exit codes over the socket', async () => {
    const slow = await sbx(['exec', '-i', '--timeout', '500ms', id, '--', 'sh', '-c', 'echo started; sleep 10'], { stdin: '' });
    expect(slow.code).toBe(124);
    expect(slow.stdout).toBe('started\n');
    expect(slow.stderr).toMatch(/timed out/);
    expect((await sbx(['exec', '-i', 'sb-nope', '--', 'true'], { stdin: 'x' })).code).toBe(125);
    expect((await sbx(['exec', '-i', '--timeout', '100h', id, '--', 'true'], { stdin: 'x' })).code).toBe(125);
  });

  it('falls back to buffered stdin when the server has no WebSocket exec (404 on upgrade)', async () => {
    // A proxy that refuses every upgrade as a server without the route would, and relays the rest.
    const upstream = new URL(server.url);
    const sockets: Socket[] = [];
    let refused = 0;
    const proxy: Server = createServer((client) => {
      sockets.push(client);
      client.on('error', () => undefined);
      client.once('data', (first: Buffer) => {
        if (/^upgrade:\s*websocket/im.test(first.toString('latin1'))) {
          refused++;
          const body = JSON.stringify({ code: 'not_found', message: 'no route for GET /api/v1/sandboxes/x/exec/ws' });
          client.end(
            `HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ` +
              `${body.length}\r\nconnection: close\r\n\r\n${body}`,
          );
          return;
        }
        const up = connect(Number(upstream.port), upstream.hostname);
        sockets.push(up);
        up.on('error', () => undefined);
        up.write(first);
        client.pipe(up).pipe(client);
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    try {
      const port = (proxy.address() as { port: number }).port;
      const r = await sbxAt(`http://127.0.0.1:${port}`)(['exec', '-i', id, '--', 'cat'], { stdin: 'line one\nline two\n' });
      expect(refused).toBe(1);
      expect(r).toMatchObject({ code: 0, stdout: 'line one\nline two\n' });
      // It says stdin was not live (the issue: "otherwise says so").
      expect(r.stderr).toBe('this server has no WebSocket exec: stdin is read to its end and sent before the command starts\n');
    } finally {
      for (const s of sockets) s.destroy();
      proxy.close();
    }
  });
});
