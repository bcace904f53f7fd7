import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SKIP, dockerTitle, requireEngine, TEST_IMAGE } from '../docker/engine.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

/** A pretend terminal on stdin: records raw-mode switches. */
function ttyStdin() {
  const stream = new PassThrough() as PassThrough & {
    isTTY: boolean;
    isRaw: boolean;
    setRawMode: (on: boolean) => unknown;
    modes: boolean[];
  };
  stream.isTTY = true;
  stream.isRaw = false;
  stream.modes = [];
  stream.setRawMode = (on: boolean) => {
    stream.isRaw = on;
    stream.modes.push(on);
    return stream;
  };
  return stream;
}

describe('sbx shell (mock provider: no terminals)', () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  let id: string;
  beforeAll(async () => {
    server = await startTestServer();
    sbx = sbxAt(server.url);
    id = (await sbx(['spawn'])).stdout.trim();
  });
  afterAll(async () => server?.close());

  it('needs a terminal on stdin: says so and exits 2', async () => {
    const r = await sbx(['shell', id], { stdin: 'echo hi\n' });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^sbx: shell needs a terminal on stdin.*sbx exec/);
  });

  it('an unknown sandbox exits 4', async () => {
    expect((await sbx(['shell', 'sb-nope'], { stdinStream: ttyStdin() })).code).toBe(4);
  });

  it('runs the shell in line mode without raw mode, says why, and exits with its code', async () => {
    const stdin = ttyStdin();
    const run = sbx(['shell', id, '-e', 'WHO=tester'], {
      stdinStream: stdin,
      onStdout: (_c, all) => {
        if (all().includes('hello tester') && !stdin.writableEnded) stdin.write('exit 3\n');
      },
    });
    stdin.write('echo "hello $WHO"\n');
    const r = await run;
    expect(r.code).toBe(3);
    expect(r.stdout).toBe('hello tester\n');
    expect(r.stderr).toMatch(/mock provider has no terminals/);
    expect(stdin.modes).toEqual([]);
  });

  it('Ctrl-D (end of local stdin) ends the shell', async () => {
    const stdin = ttyStdin();
    const run = sbx(['shell', id, '--sh', 'cat; echo bye'], { stdinStream: stdin });
    stdin.end('x\n');
    const r = await run;
    expect(r).toMatchObject({ code: 0, stdout: 'x\nbye\n' });
  });
});

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('sbx shell (docker provider: a terminal)'), () => {
  let server: TestServer;
  let sbx: ReturnType<typeof sbxAt>;
  let id: string;
  beforeAll(async () => {
    await requireEngine();
    server = await startTestServer({ providers: { default: 'docker' }, defaults: { image: TEST_IMAGE, memory_mb: 64 } });
    sbx = sbxAt(server.url);
    id = (await sbx(['spawn'])).stdout.trim();
  });
  afterAll(async () => {
    if (id) await sbx(['rm', id]).catch(() => undefined);
    await server?.close();
  });

  it('raw mode on, the terminal size follows resize, raw mode restored on exit', async () => {
    const stdin = ttyStdin();
    let sink: { columns: number; rows: number; emit(e: string): boolean } | undefined;
    let step = 0;
    const run = sbx(['shell', id], {
      tty: true,
      stdinStream: stdin,
      onStdoutSink: (s) => {
        s.columns = 101;
        s.rows = 33;
        sink = s as never;
      },
      onStdout: (_c, all) => {
        const out = all();
        if (step === 0 && out.includes('33 101')) {
          step = 1;
          sink!.columns = 120;
          sink!.rows = 50;
          sink!.emit('resize');
          setTimeout(() => stdin.write('stty size\r'), 300);
        } else if (step === 1 && out.includes('50 120')) {
          step = 2;
          stdin.write('exit 7\r');
        }
      },
    });
    setTimeout(() => stdin.write('stty size\r'), 300);
    const guard = setTimeout(() => stdin.write('exit 99\r'), 15_000);
    const r = await run;
    clearTimeout(guard);
    expect(step).toBe(2);
    expect(r.code).toBe(7);
    expect(stdin.modes).toEqual([true, false]);
  });
});
