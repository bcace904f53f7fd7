/**
 * The interactive exec session of core (core/sandboxes/exec-session.ts) with fake start functions
 * and a recording sink: no socket, no provider, no timers.
 */
import { describe, expect, it } from 'vitest';
import { AsyncQueue } from '../../src/core/async-queue.js';
import { badRequest } from '../../src/core/errors.js';
import type { ExecControl } from '../../src/core/ports/index.js';
import type { ExecCommand, ExecItem } from '../../src/core/sandboxes/exec.js';
import { InteractiveExec, type SessionSink } from '../../src/core/sandboxes/exec-session.js';
import { execCommand, ExecFramer, execFrames } from '../../src/transports/shared/exec-framing.js';

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const tick = () => new Promise((r) => setTimeout(r, 0));

function recorder() {
  const log: string[] = [];
  let closed!: () => void;
  const done = new Promise<void>((r) => (closed = r));
  const sink: SessionSink = {
    output: async (stream, data) => void log.push(`${stream}:${dec(data)}`),
    exit: async (e) => void log.push(`exit:${e.exit_code}${e.timed_out ? ':timeout' : ''}`),
    error: async (code, message) => void log.push(`error:${code}:${message}`),
    close: () => {
      log.push('close');
      closed();
    },
    pause: () => void log.push('pause'),
    resume: () => void log.push('resume'),
  };
  return { log, sink, done };
}

/** A command that echoes its stdin, upper-cased, and records its controls. */
function echoStarter(seen: { input?: ExecCommand; controls: ExecControl[]; signal?: AbortSignal }) {
  return async (input: ExecCommand, signal: AbortSignal): Promise<AsyncIterable<ExecItem>> => {
    seen.input = input;
    seen.signal = signal;
    void (async () => {
      for await (const c of input.controls!) seen.controls.push(c);
    })();
    return (async function* () {
      for await (const chunk of input.stdin as AsyncIterable<Uint8Array>)
        yield { stream: 'stdout' as const, data: enc(dec(chunk).toUpperCase()) };
      yield { stream: 'exit' as const, exit_code: 0, duration_ms: 5, timed_out: false };
    })();
  };
}

describe('InteractiveExec', () => {
  it('start → stdin → controls in order → eof → output, exit, close', async () => {
    const { log, sink, done } = recorder();
    const seen = { controls: [] as ExecControl[] } as { input?: ExecCommand; controls: ExecControl[] };
    const s = new InteractiveExec(echoStarter(seen), sink);
    expect(s.state).toBe('waiting');
    s.receive({ type: 'start', input: { command: 'cat', stdin: enc('first ') } });
    expect(s.state).toBe('running');
    s.receive({ type: 'stdin', data: enc('second') });
    s.receive({ type: 'control', control: { type: 'resize', cols: 100, rows: 30 } });
    s.receive({ type: 'control', control: { type: 'signal', signal: 'SIGINT' } });
    s.receive({ type: 'stdin_eof' });
    await done;
    expect(log).toEqual(['stdout:FIRST ', 'stdout:SECOND', 'exit:0', 'close']);
    expect(seen.controls).toEqual([
      { type: 'resize', cols: 100, rows: 30 },
      { type: 'signal', signal: 'SIGINT' },
    ]);
    expect(seen.input?.command).toBe('cat');
    expect(s.state).toBe('closed');
  });

  it('protocol mistakes end the session with bad_request: before start, a second start, stdin after eof, unknown types', async () => {
    for (const [msgs, message] of [
      [[{ type: 'stdin', data: enc('x') }], 'the first message must be start, not "stdin"'],
      [
        [
          { type: 'start', input: { command: 'cat' } },
          { type: 'start', input: { command: 'cat' } },
        ],
        'the command has already started',
      ],
      [
        [{ type: 'start', input: { command: 'cat' } }, { type: 'stdin_eof' }, { type: 'stdin', data: enc('late') }],
        'stdin after stdin_eof',
      ],
      [
        [
          { type: 'start', input: { command: 'cat' } },
          { type: 'unknown', name: 'teleport' },
        ],
        'unknown message type "teleport"',
      ],
    ] as const) {
      const { log, sink, done } = recorder();
      const never = async () =>
        (async function* (): AsyncGenerator<ExecItem> {
          await new Promise(() => undefined);
        })();
      const s = new InteractiveExec(never, sink);
      for (const m of msgs) s.receive(m as never);
      await done;
      expect(log).toEqual([`error:bad_request:${message}`, 'close']);
    }
  });

  it('a start that fails (lookups, limits) is one error message; a transport rejection too', async () => {
    const a = recorder();
    new InteractiveExec(async () => {
      throw badRequest('sandbox sb-x not found');
    }, a.sink).receive({ type: 'start', input: { command: 'x' } });
    await a.done;
    expect(a.log).toEqual(['error:bad_request:sandbox sb-x not found', 'close']);
    const b = recorder();
    new InteractiveExec(async () => (async function* () {})(), b.sink).reject(badRequest('malformed JSON message'));
    await b.done;
    expect(b.log).toEqual(['error:bad_request:malformed JSON message', 'close']);
  });

  it('a crash is reported as internal without its text, and handed to onInternalError', async () => {
    const { log, sink, done } = recorder();
    const internal: unknown[] = [];
    new InteractiveExec(
      async () =>
        (async function* (): AsyncGenerator<ExecItem> {
          throw new TypeError('secret detail');
        })(),
      sink,
      { onInternalError: (e) => internal.push(e) },
    ).receive({ type: 'start', input: { command: 'x' } });
    await done;
    expect(log).toEqual(['error:internal:internal server error', 'close']);
    expect(String(internal[0])).toContain('secret detail');
  });

  it('stdin backpressure: pause above the high-water mark, resume below the low one', async () => {
    const { log, sink } = recorder();
    const gate = new AsyncQueue<void>();
    const starter = async (input: ExecCommand): Promise<AsyncIterable<ExecItem>> =>
      (async function* () {
        const it = (input.stdin as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
        for await (const _ of gate) {
          const r = await it.next();
          if (r.done) break;
        }
        yield { stream: 'exit' as const, exit_code: 0, duration_ms: 1, timed_out: false };
      })();
    const s = new InteractiveExec(starter, sink, { highWater: 10, lowWater: 4 });
    s.receive({ type: 'start', input: { command: 'slow' } });
    await tick();
    s.receive({ type: 'stdin', data: enc('123456') });
    s.receive({ type: 'stdin', data: enc('789012') });
    expect(log).toEqual(['pause']);
    expect(s.pendingStdin).toBe(12);
    gate.push();
    await tick();
    expect(log).toEqual(['pause']); // 6 left: not below 4 yet
    gate.push();
    await tick();
    expect(log).toEqual(['pause', 'resume']);
    expect(s.pendingStdin).toBe(0);
  });

  it('the client going away aborts the running command and sends nothing more', async () => {
    const { log, sink } = recorder();
    const seen = { controls: [] as ExecControl[] } as { signal?: AbortSignal; controls: ExecControl[] };
    const s = new InteractiveExec(echoStarter(seen), sink);
    s.receive({ type: 'start', input: { command: 'cat' } });
    await tick();
    s.clientGone();
    expect(seen.signal?.aborted).toBe(true);
    expect(s.state).toBe('closed');
    s.receive({ type: 'stdin', data: enc('ignored') });
    await tick();
    expect(log).toEqual([]);
  });

  it('a timed-out command reports its exit as such', async () => {
    const { log, sink, done } = recorder();
    new InteractiveExec(
      async () =>
        (async function* () {
          yield { stream: 'stderr' as const, data: enc('sbx: command timed out after 1s\n') };
          yield { stream: 'exit' as const, exit_code: 124, duration_ms: 1000, timed_out: true };
        })(),
      sink,
    ).receive({ type: 'start', input: { command: 'sleep 9' } });
    await done;
    expect(log).toEqual(['stderr:sbx: command timed out after 1s\n', 'exit:124:timeout', 'close']);
  });

  it('output then a failure mid-stream: the output, one error, close; a stream without an exit is a provider_error', async () => {
    const a = recorder();
    new InteractiveExec(
      async () =>
        (async function* (): AsyncGenerator<ExecItem> {
          yield { stream: 'stdout', data: enc('partial') };
          throw badRequest('sandbox sb-x is being destroyed');
        })(),
      a.sink,
    ).receive({ type: 'start', input: { command: 'x' } });
    await a.done;
    expect(a.log).toEqual(['stdout:partial', 'error:bad_request:sandbox sb-x is being destroyed', 'close']);
    const b = recorder();
    new InteractiveExec(
      async () =>
        (async function* (): AsyncGenerator<ExecItem> {
          yield { stream: 'stderr', data: enc('bye') };
        })(),
      b.sink,
    ).receive({ type: 'start', input: { command: 'x' } });
    await b.done;
    expect(b.log).toEqual(['stderr:bye', 'error:provider_error:exec ended without an exit status', 'close']);
  });

  it('a client gone before start never starts anything; a client gone while start is pending gets nothing sent', async () => {
    const { log, sink } = recorder();
    let started = 0;
    const s = new InteractiveExec(async () => {
      started++;
      return (async function* () {})();
    }, sink);
    s.clientGone();
    s.receive({ type: 'start', input: { command: 'x' } });
    await tick();
    expect([s.state, started, log]).toEqual(['closed', 0, []]);

    const b = recorder();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let signal: AbortSignal | undefined;
    const t = new InteractiveExec(async (_input, sig) => {
      signal = sig;
      await gate;
      return (async function* () {
        yield { stream: 'exit' as const, exit_code: 0, duration_ms: 1, timed_out: false };
      })();
    }, b.sink);
    t.receive({ type: 'start', input: { command: 'x' } });
    t.clientGone();
    release();
    await tick();
    expect(signal?.aborted).toBe(true);
    expect(b.log).toEqual([]);
  });

  it('a paused transport is resumed when the session ends, so it reads the close', async () => {
    const { log, sink } = recorder();
    const s = new InteractiveExec(
      async () =>
        (async function* (): AsyncGenerator<ExecItem> {
          await new Promise(() => undefined);
        })(),
      sink,
      { highWater: 2, lowWater: 1 },
    );
    s.receive({ type: 'start', input: { command: 'x' } });
    s.receive({ type: 'stdin', data: enc('abc') });
    expect(log).toEqual(['pause']);
    s.clientGone();
    expect(log).toEqual(['pause', 'resume']);
  });
});

describe('exec framing', () => {
  const euro = enc('€'); // 3 bytes

  it('text keeps a character split across chunks whole; binary sends invalid bytes as base64', () => {
    const f = new ExecFramer('text');
    expect(f.output('stdout', euro.subarray(0, 1))).toEqual([]);
    expect(f.output('stdout', euro.subarray(1))).toEqual([{ kind: 'output', stream: 'stdout', data: '€' }]);
    const b = new ExecFramer('binary');
    expect(b.output('stdout', new Uint8Array([0xff, 0x00]))).toEqual([
      { kind: 'output', stream: 'stdout', data: '/wA=', encoding: 'base64' },
    ]);
    expect(new ExecFramer('base64').output('stderr', enc('hi'))).toEqual([
      { kind: 'output', stream: 'stderr', data: 'aGk=', encoding: 'base64' },
    ]);
  });

  it('the exit (and an error) come after what is left of a split character', () => {
    const f = new ExecFramer('text');
    f.output('stderr', euro.subarray(0, 2));
    expect(f.exit({ stream: 'exit', exit_code: 124, duration_ms: 1500, timed_out: true })).toEqual([
      { kind: 'output', stream: 'stderr', data: '\uFFFD' },
      { kind: 'exit', exit_code: 124, duration: '1.5s', timed_out: true },
    ]);
    expect(new ExecFramer('text').error(new TypeError('secret'))).toEqual([
      { kind: 'error', code: 'provider_error', message: 'exec failed' },
    ]);
  });

  it('execFrames: a failing stream ends with one error frame, unless onError declines it', async () => {
    async function* items(): AsyncGenerator<ExecItem> {
      yield { stream: 'stdout', data: enc('a') };
      throw badRequest('gone');
    }
    const all = [];
    for await (const fr of execFrames(items(), 'text')) all.push(fr);
    expect(all).toEqual([
      { kind: 'output', stream: 'stdout', data: 'a' },
      { kind: 'error', code: 'bad_request', message: 'gone' },
    ]);
    const quiet = [];
    for await (const fr of execFrames(items(), 'text', () => false)) quiet.push(fr);
    expect(quiet).toEqual([{ kind: 'output', stream: 'stdout', data: 'a' }]);
  });

  it('execCommand decodes the stdin extension and keeps the rest of the request', () => {
    const c = execCommand({ command: 'cat', args: ['-n'], stdin: 'aGk=', stdin_encoding: 'base64', timeout: '5s' });
    expect({ ...c, stdin: dec(c.stdin as Uint8Array) }).toEqual({
      command: 'cat',
      args: ['-n'],
      env: undefined,
      workdir: undefined,
      timeout: '5s',
      mode: undefined,
      stdin: 'hi',
    });
  });
});
