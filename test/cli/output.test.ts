import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Output } from '../../src/transports/cli/output/output.js';
import { newLines } from '../../src/transports/cli/commands/logs.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';

class Sink extends Writable {
  text = '';
  constructor(readonly isTTY: boolean) {
    super();
  }
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
}

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => {
  await server?.close();
});

describe('output', () => {
  it('shows a spinner on a terminal stderr only for waits over 300 ms, then erases it', async () => {
    const err = new Sink(true);
    const out = new Output({ stdout: new Sink(false), stderr: err, json: false, color: false });
    expect(await out.spin('fast', Promise.resolve(1))).toBe(1);
    expect(err.text).toBe('');
    await out.spin('slow work', new Promise((r) => setTimeout(r, 500)));
    expect(err.text).toContain('slow work');
    expect(err.text.endsWith('\r\x1b[K')).toBe(true);
    const piped = new Sink(false);
    await new Output({ stdout: new Sink(false), stderr: piped, json: false, color: false }).spin('x', new Promise((r) => setTimeout(r, 400)));
    expect(piped.text).toBe('');
  });

  it('colours tables on a terminal unless --no-color or NO_COLOR; never when piped', async () => {
    await sbx(['spawn']);
    const colored = await sbx(['ls'], { tty: true });
    expect(colored.stdout).toContain('\x1b[');
    expect((await sbx(['ls', '--no-color'], { tty: true })).stdout).not.toContain('\x1b[');
    expect((await sbx(['ls'], { tty: true, env: { NO_COLOR: '1' } })).stdout).not.toContain('\x1b[');
    expect((await sbx(['ls'])).stdout).not.toContain('\x1b[');
  });

  it('error lines are one line prefixed with sbx:', () => {
    const err = new Sink(false);
    new Output({ stdout: new Sink(false), stderr: err, json: false, color: false }).error('first\n  second');
    expect(err.text).toBe('sbx: first second\n');
  });

  it('logs -f finds the new lines of a later tail window', () => {
    expect(newLines(['a', 'b', 'c'], ['b', 'c', 'd', 'e'])).toEqual(['d', 'e']);
    expect(newLines(['a', 'b'], ['a', 'b'])).toEqual([]);
    expect(newLines([], ['x'])).toEqual(['x']);
    expect(newLines(['x', 'x'], ['x', 'x', 'x'])).toEqual(['x']);
    expect(newLines(['a'], ['z'])).toEqual(['z']);
  });

  it('watch on a terminal renders the live view with each event and a status line', async () => {
    const stop = new AbortController();
    const run = sbx(['watch', '--types', 'sandbox.*'], { tty: true, signal: stop.signal });
    await new Promise((r) => setTimeout(r, 600));
    const id = (await sbx(['spawn'])).stdout.trim();
    await new Promise((r) => setTimeout(r, 400));
    stop.abort();
    const r = await run;
    expect(r.code).toBe(0);
    const text = r.stdout.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
    expect(text).toMatch(new RegExp(`sandbox\\.created\\s+${id}`));
    expect(text).toMatch(new RegExp(`sandbox\\.running\\s+${id}`));
    expect(text).toContain(server.url);
  });
});
