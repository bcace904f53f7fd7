/** The live `sbx watch` view on a (pretend) terminal, run in-process against a real server. */
import { Writable } from 'node:stream';
import { Chalk } from 'chalk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SbxEvent } from '../../src/client/types.js';
import { startWatchView } from '../../src/transports/cli/output/watch-view.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt, type RunOptions } from './run-sbx.js';

/** SGR sequences (colours, bold, dim); cursor and erase sequences are not colour. */
const SGR = /\x1b\[[0-9;]*m/;
const strip = (s: string) => s.replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '');

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
});
afterAll(async () => server?.close());

/** Connected event-stream clients, from the server's diagnostics. */
async function subscribers(): Promise<number> {
  const res = await fetch(`${server.url}/api/v1/diagnostics`);
  return ((await res.json()) as { events: { subscribers: number } }).events.subscribers;
}

/**
 * Runs `sbx watch` on a pretend terminal while one sandbox is spawned; returns the run and the id.
 * The stream counts as open when the server has one more subscriber: ink holds back its live
 * status line until exit when `CI` is set, so the rendered text cannot tell.
 */
async function watchSpawn(argv: string[], opts: RunOptions = {}) {
  const stop = new AbortController();
  const before = await subscribers();
  const run = sbx(['watch', '--types', 'sandbox.*', ...argv], { tty: true, signal: stop.signal, ...opts });
  for (let waited = 0; (await subscribers()) <= before; waited += 50) {
    if (waited > 10_000) throw new Error('the watch never connected to the event stream');
    await new Promise((r) => setTimeout(r, 50));
  }
  const id = (await sbx(['spawn'])).stdout.trim();
  await new Promise((r) => setTimeout(r, 400));
  stop.abort();
  const r = await run;
  for (let waited = 0; (await subscribers()) > before; waited += 50) {
    if (waited > 10_000) throw new Error('the watch never left the event stream');
    await new Promise((r) => setTimeout(r, 50));
  }
  return { r, id };
}

describe('sbx watch live view', () => {
  it('colours on a terminal by default', async () => {
    const { r, id } = await watchSpawn([]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(SGR);
    expect(strip(r.stdout)).toMatch(new RegExp(`sandbox\\.created\\s+${id}`));
  });

  it('takes colour from the CLI settings: NO_COLOR and --no-color, also in-process', async () => {
    for (const [argv, env] of [
      [[], { NO_COLOR: '1' }],
      [['--no-color'], {}],
    ] as const) {
      const { r, id } = await watchSpawn([...argv], { env: { ...env } });
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`sandbox\\.created\\s+${id}`));
      expect(r.stdout).not.toMatch(SGR);
    }
  });

  it('a terminal reporting 0 columns still gets whole lines', async () => {
    // ink asks the process's own terminal (and then COLUMNS/LINES) when the stream reports none.
    const saved = { COLUMNS: process.env.COLUMNS, LINES: process.env.LINES };
    process.env.COLUMNS = '0';
    process.env.LINES = '0';
    let result: Awaited<ReturnType<typeof watchSpawn>>;
    try {
      result = await watchSpawn([], { env: { NO_COLOR: '1' }, onStdoutSink: (s) => (s.columns = 0) });
    } finally {
      for (const [k, v] of Object.entries(saved))
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
    }
    const { r, id } = result;
    expect(r.code).toBe(0);
    const text = strip(r.stdout);
    expect(text).toMatch(new RegExp(`sandbox\\.created\\s+${id}`));
    expect(text).toContain(`watching ${server.url}`);
  });
});

class Term extends Writable {
  text = '';
  readonly isTTY = true;
  columns = 120;
  rows = 40;
  override _write(chunk: Buffer, _e: BufferEncoding, cb: () => void): void {
    this.text += chunk.toString();
    cb();
  }
}

describe('watch view', () => {
  it('prints every event once however many come, and counts them', async () => {
    const stdout = new Term();
    const view = await startWatchView({ streams: { stdout, stderr: new Term() }, c: new Chalk({ level: 0 }) }, 'http://x');
    view.setState('open');
    const n = 3000;
    for (let i = 1; i <= n; i++) {
      const ev: SbxEvent = {
        id: i,
        type: 'exec.completed',
        timestamp: '2025-01-01T10:00:00.000Z',
        sandbox_id: `sb-${i}`,
        data: { exit_code: 0 },
      };
      view.push(ev);
    }
    await new Promise((r) => setTimeout(r, 100));
    await view.close();
    const text = strip(stdout.text);
    for (const i of [1, 1000, 1001, 2999, 3000])
      expect(text.match(new RegExp(`exec\\.completed\\s+sb-${i} `, 'g')), `event ${i}`).toHaveLength(1);
    expect(text).toContain(`${n} events (exec ${n})`);
  });
});
