/**
 * Background processes over the HTTP API (DESIGN.md §10), run against each provider by the suites
 * that import it: output read by offset reassembles byte-exact across a disconnect, the exit is
 * recorded, kill/signal/timeout end in their states, and bad input gets a clear error.
 */
import { expect, it } from 'vitest';
import { call } from '../helpers/http.js';
import { readOutput } from './helpers.js';
import { waitFor } from '../helpers/wait.js';

/** 5 s of output on both streams, then exit 7. */
const TALKER = 'i=0; while [ $i -lt 50 ]; do i=$((i+1)); echo "out line $i"; echo "err line $i" >&2; sleep 0.1; done; exit 7';
const expectedOf = (s: 'out' | 'err') => Array.from({ length: 50 }, (_, i) => `${s} line ${i + 1}\n`).join('');

export function processContract(
  ctx: () => { url: string; spawn: () => Promise<string>; runner: 'detached' | 'attached'; tty?: boolean; provider?: string },
): void {
  const wait = async (url: string, sb: string, pid: string, ms = 20_000) => {
    const until = Date.now() + ms;
    for (;;) {
      const p = (await call(url, 'GET', `/api/v1/sandboxes/${sb}/processes/${pid}`)).body;
      if (p.state !== 'running' || Date.now() > until) return p;
      await new Promise((r) => setTimeout(r, 200));
    }
  };

  it('streams output by offset: a reader that disconnects and comes back with its offset loses no byte', async () => {
    const { url, spawn, runner } = ctx();
    const sb = await spawn();
    const started = await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, { command: TALKER });
    expect(started.status).toBe(201);
    expect(started.body).toMatchObject({
      sandbox_id: sb,
      command: TALKER,
      args: [],
      state: 'running',
      runner,
      exit_code: null,
      ended_at: null,
    });
    expect(started.body.id).toMatch(/^p-[a-z0-9]{12}$/);
    const pid = started.body.id as string;

    const first = await readOutput(url, sb, pid, { follow: true, stopAfter: 300 });
    expect(first.bytes.byteLength).toBeGreaterThanOrEqual(300);
    const rest = await readOutput(url, sb, pid, { follow: true, offset: first.next });
    const lines = [...first.lines, ...rest.lines].filter((l) => l.stream === 'stdout' || l.stream === 'stderr');
    const of = (s: string) =>
      Buffer.concat(
        lines.filter((l) => l.stream === s).map((l) => Buffer.from(l.data!, l.encoding === 'base64' ? 'base64' : 'utf8')),
      ).toString();
    expect(of('stdout')).toBe(expectedOf('out'));
    expect(of('stderr')).toBe(expectedOf('err'));
    expect(rest.lines.at(-1)).toEqual({ stream: 'exit', offset: rest.next, exit_code: 7, state: 'exited' });

    const done = (await call(url, 'GET', `/api/v1/sandboxes/${sb}/processes/${pid}`)).body;
    expect(done).toMatchObject({ id: pid, state: 'exited', exit_code: 7 });
    expect(Date.parse(done.ended_at)).toBeGreaterThanOrEqual(Date.parse(done.started_at));
    // Read again from 0 without follow: everything, then the exit; past the end: only the exit.
    const again = await readOutput(url, sb, pid);
    expect(again.bytes.byteLength).toBe(rest.next);
    const past = await readOutput(url, sb, pid, { offset: rest.next + 1000 });
    expect(past.lines).toEqual([{ stream: 'exit', offset: rest.next + 1000, exit_code: 7, state: 'exited' }]);
    expect((await call(url, 'GET', `/api/v1/sandboxes/${sb}/processes`)).body.map((p: { id: string }) => p.id)).toContain(pid);
  }, 60_000);

  it('binary output arrives byte-exact (base64 where not UTF-8)', async () => {
    const { url, spawn } = ctx();
    const sb = await spawn();
    const p = await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, {
      command: 'head -c 20000 /dev/urandom > r.bin && cat r.bin',
      workdir: '/tmp',
    });
    expect(p.status).toBe(201);
    expect((await wait(url, sb, p.body.id)).exit_code).toBe(0);
    const out = await readOutput(url, sb, p.body.id);
    const file = await fetch(`${url}/api/v1/sandboxes/${sb}/files?path=/tmp/r.bin`, { headers: { Accept: 'application/octet-stream' } });
    const content = Buffer.from(await file.arrayBuffer());
    expect(content.byteLength).toBe(20000);
    expect(out.bytes.equals(content)).toBe(true);
    expect(out.lines.some((l) => l.encoding === 'base64')).toBe(true);
  }, 60_000);

  it('kill, signal and timeout end a process in their states', async () => {
    const { url, spawn } = ctx();
    const sb = await spawn();
    const start = async (body: Record<string, unknown>) =>
      (await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, body)).body.id as string;
    const killed = await start({ command: 'sleep', args: ['100'], mode: 'argv' });
    const termed = await start({ command: 'echo ready; sleep 100' });
    const timed = await start({ command: 'sleep 100', timeout: '1s' });
    // A kill right after the start ends it whatever it was doing; the TERM goes to a command seen running.
    const k = await call(url, 'DELETE', `/api/v1/sandboxes/${sb}/processes/${killed}`);
    expect(k.status).toBe(200);
    expect(k.body).toMatchObject({ id: killed, state: 'killed' });
    expect((await readOutput(url, sb, termed, { follow: true, stopAfter: 6 })).bytes.toString()).toBe('ready\n');
    const s = await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes/${termed}/signal`, { signal: 'TERM' });
    expect(s.status).toBe(200);
    expect(await wait(url, sb, termed)).toMatchObject({ state: 'exited', exit_code: 143 });
    expect(await wait(url, sb, timed)).toMatchObject({ state: 'timeout' });
    // An ended process takes no signal; a kill answers it as it is.
    expect((await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes/${termed}/signal`, { signal: 'SIGTERM' })).status).toBe(409);
    expect((await call(url, 'DELETE', `/api/v1/sandboxes/${sb}/processes/${termed}`)).body.state).toBe('exited');
  }, 60_000);

  it('answers bad input with clear errors and creates nothing', async () => {
    const { url, spawn } = ctx();
    const sb = await spawn();
    const other = await spawn();
    const p = (await call(url, 'POST', `/api/v1/sandboxes/${sb}/processes`, { command: 'sleep 30' })).body.id as string;
    const base = `/api/v1/sandboxes/${sb}/processes`;
    const notFound = await call(url, 'GET', `/api/v1/sandboxes/${other}/processes/${p}`);
    expect(notFound.status).toBe(404);
    expect(notFound.body.code).toBe('not_found');
    expect((await call(url, 'GET', `/api/v1/sandboxes/${other}/processes/${p}/output`)).status).toBe(404);
    expect((await call(url, 'GET', `${base}/p-nope`)).status).toBe(404);
    const badSignal = await call(url, 'POST', `${base}/${p}/signal`, { signal: 'SIGSTOP' });
    expect(badSignal.status).toBe(400);
    expect(badSignal.body.message).toMatch(/SIGSTOP/);
    expect((await call(url, 'POST', base, { command: 'cat', stdin: 'x' })).status).toBe(400);
    expect((await call(url, 'POST', base, { command: '' })).status).toBe(400);
    expect((await call(url, 'POST', base, { command: 'true', workdir: '/no/such/dir' })).status).toBe(400);
    expect((await call(url, 'GET', `${base}/${p}/output?offset=-1`)).status).toBe(400);
    expect((await call(url, 'POST', `/api/v1/sandboxes/sb-missing/processes`, { command: 'true' })).status).toBe(404);
    // Only the one process was made.
    expect((await call(url, 'GET', base)).body.map((x: { id: string }) => x.id)).toEqual([p]);
    await call(url, 'DELETE', `${base}/${p}`);
  }, 60_000);

  it('stdin: true takes live stdin through …/stdin (text and base64) until …/stdin/close', async () => {
    const { url, spawn } = ctx();
    const sb = await spawn();
    const base = `/api/v1/sandboxes/${sb}/processes`;
    const started = await call(url, 'POST', base, { command: 'cat; echo end', stdin: true });
    expect(started.status).toBe(201);
    // Live input needs the exec held open: an attached process on every provider.
    expect(started.body).toMatchObject({ state: 'running', runner: 'attached' });
    const p = started.body.id as string;
    expect((await call(url, 'POST', `${base}/${p}/stdin`, { data: 'abc' })).status).toBe(200);
    expect(
      (await call(url, 'POST', `${base}/${p}/stdin`, { data: Buffer.from([0, 1, 10]).toString('base64'), encoding: 'base64' })).status,
    ).toBe(200);
    expect((await call(url, 'POST', `${base}/${p}/stdin/close`)).status).toBe(200);
    const done = await wait(url, sb, p);
    expect(done).toMatchObject({ state: 'exited', exit_code: 0 });
    const out = await readOutput(url, sb, p);
    expect(out.bytes.equals(Buffer.concat([Buffer.from('abc'), Buffer.from([0, 1, 10]), Buffer.from('end\n')]))).toBe(true);
    // After the end, and on a process without stdin: 409; a resize without a terminal: 400.
    expect((await call(url, 'POST', `${base}/${p}/stdin`, { data: 'x' })).status).toBe(409);
    const plain = (await call(url, 'POST', base, { command: 'sleep 30' })).body.id as string;
    expect((await call(url, 'POST', `${base}/${plain}/stdin`, { data: 'x' })).body).toMatchObject({ code: 'conflict' });
    const noTty = (await call(url, 'POST', base, { command: 'sleep 30', stdin: true })).body.id as string;
    expect((await call(url, 'POST', `${base}/${noTty}/resize`, { cols: 80, rows: 24 })).body).toMatchObject({ code: 'bad_request' });
    expect((await call(url, 'POST', `${base}/${noTty}/stdin`, { data: 'x', encoding: 'hex' })).status).toBe(400);
    await call(url, 'DELETE', `${base}/${plain}`);
    await call(url, 'DELETE', `${base}/${noTty}`);
  }, 60_000);

  // docker sizes an exec's terminal just after it starts (as `docker exec -t` does), before any input
  // reaches the command, and …/resize answers once the terminal has the new size: the command asks
  // for the size after a line of input each time, with no wait of its own.
  it('pty: {cols, rows} runs it in a terminal of that size, resized by …/resize (501 where the provider has none)', async () => {
    const { url, spawn, tty, provider } = ctx();
    const sb = await spawn();
    const base = `/api/v1/sandboxes/${sb}/processes`;
    const started = await call(url, 'POST', base, {
      command: 'read x; stty size; read x; stty size',
      stdin: true,
      pty: { cols: 100, rows: 30 },
    });
    if (!tty) {
      expect(started.status).toBe(501);
      expect(started.body.message).toContain(provider ?? 'provider');
      return;
    }
    expect(started.status).toBe(201);
    const p = started.body.id as string;
    const output = async () => (await readOutput(url, sb, p)).bytes.toString();
    await call(url, 'POST', `${base}/${p}/stdin`, { data: 'go\r' });
    await waitFor('the terminal size printed', async () => (await output()).includes('30 100'));
    expect((await call(url, 'POST', `${base}/${p}/resize`, { cols: 120, rows: 40 })).status).toBe(200);
    await call(url, 'POST', `${base}/${p}/stdin`, { data: 'go\r' });
    expect(await wait(url, sb, p)).toMatchObject({ state: 'exited', exit_code: 0 });
    expect(await output()).toMatch(/30 100[\s\S]*40 120/);
  }, 60_000);
}
