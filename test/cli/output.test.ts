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
    await new Output({ stdout: new Sink(false), stderr: piped, json: false, color: false }).spin(
      'x',
      new Promise((r) => setTimeout(r, 400)),
    );
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
    const strip = (t: string) => t.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');
    let seen = '';
    const waiters: Array<() => void> = [];
    const run = sbx(['watch', '--types', 'sandbox.*'], {
      tty: true,
      signal: stop.signal,
      onStdout: (_chunk, all) => {
        seen = strip(all());
        for (const w of waiters.splice(0)) w();
      },
    });
    // Waits on what the view printed, not on time: a loaded machine only makes it slower.
    const until = async (pred: () => boolean, what: string, ms = 15_000) => {
      const deadline = Date.now() + ms;
      while (!pred()) {
        if (Date.now() > deadline) throw new Error(`watch view never showed ${what}; it printed: ${JSON.stringify(seen)}`);
        await new Promise<void>((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
    };
    try {
      // Events published once the server holds the watch's stream are shown. Waited for on the server
      // (its subscriber count), not in the output: in CI ink draws the status line only at the end.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const m = (await (await fetch(`${server.url}/api/v1/metrics`)).json()) as { events: { subscribers: number } };
        if (m.events.subscribers >= 1) break;
        if (Date.now() > deadline) throw new Error(`the watch never subscribed; it printed: ${JSON.stringify(seen)}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const id = (await sbx(['spawn'])).stdout.trim();
      const created = new RegExp(`sandbox\\.created\\s+${id}`);
      const running = new RegExp(`sandbox\\.running\\s+${id}`);
      await until(() => created.test(seen) && running.test(seen), `the events of ${id}`);
      stop.abort();
      const r = await run;
      expect(r.code).toBe(0);
      const text = strip(r.stdout);
      expect(text).toMatch(created);
      expect(text).toMatch(running);
      expect(text).toContain(server.url);
    } finally {
      stop.abort();
      await run;
    }
  });
});
