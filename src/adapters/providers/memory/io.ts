/**
 * Streams of the in-memory shell: what a command reads (Input) and writes (Output), pipes between
 * the stages of a pipeline, and the kill that ends a whole exec (its "process tree"). Everything
 * waits on promises, never on host I/O; a kill wakes every waiter.
 */

/** Thrown through a command when its exec is killed: the exit status is 128 + the signal's number. */
export class Killed extends Error {
  constructor(readonly code: number) {
    super(`killed (${code})`);
  }
}

/** `exit N`, unwinding to the shell it ends. */
export class ExitShell extends Error {
  constructor(readonly code: number) {
    super(`exit ${code}`);
  }
}

/** A write to a pipe whose reader is gone (SIGPIPE: 141). */
export class BrokenPipe extends Error {}

export interface Input {
  /** The next chunk; null at EOF. */
  read(): Promise<Uint8Array | null>;
}
export interface Output {
  write(chunk: Uint8Array): Promise<void>;
}
export interface Streams {
  stdin: Input;
  stdout: Output;
  stderr: Output;
}

export const EMPTY_INPUT: Input = { read: async () => null };
export const NULL_OUTPUT: Output = { write: async () => undefined };

/** The kill of one exec: every blocking wait races it. */
export class Kill {
  private readonly ac = new AbortController();
  get signal(): AbortSignal {
    return this.ac.signal;
  }
  get killed(): boolean {
    return this.ac.signal.aborted;
  }
  kill(code: number): void {
    if (!this.ac.signal.aborted) this.ac.abort(new Killed(code));
  }
  check(): void {
    if (this.ac.signal.aborted) throw this.ac.signal.reason as Killed;
  }
  /** `p`, or the kill, whichever comes first. */
  race<T>(p: Promise<T>): Promise<T> {
    this.check();
    return new Promise<T>((resolve, reject) => {
      const onKill = () => reject(this.ac.signal.reason as Killed);
      this.ac.signal.addEventListener('abort', onKill, { once: true });
      p.then(
        (v) => (this.ac.signal.removeEventListener('abort', onKill), resolve(v)),
        (e: unknown) => (this.ac.signal.removeEventListener('abort', onKill), reject(e)),
      );
    });
  }
  /** Waits `ms` of the timers' time (vitest's fake timers in the unit tier); a kill ends it at once. */
  sleep(ms: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return this.race(new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))).finally(() => clearTimeout(timer));
  }
}

/** Bytes written before a writer waits for its reader. */
const PIPE_HIGH_WATER = 256 * 1024;

/** A pipe between two stages: bounded, EOF when the writer closes, broken when the reader leaves. */
export class Pipe implements Input, Output {
  private readonly chunks: Uint8Array[] = [];
  private bytes = 0;
  private closed = false;
  private readerGone = false;
  private wakeReader: (() => void) | null = null;
  private wakeWriter: (() => void) | null = null;

  constructor(private readonly kill: Kill) {}

  async write(chunk: Uint8Array): Promise<void> {
    if (this.readerGone) throw new BrokenPipe();
    this.chunks.push(chunk);
    this.bytes += chunk.byteLength;
    this.wakeReader?.();
    while (this.bytes > PIPE_HIGH_WATER && !this.readerGone) await this.kill.race(new Promise<void>((r) => (this.wakeWriter = r)));
    if (this.readerGone) throw new BrokenPipe();
  }

  async read(): Promise<Uint8Array | null> {
    while (this.chunks.length === 0 && !this.closed) await this.kill.race(new Promise<void>((r) => (this.wakeReader = r)));
    const chunk = this.chunks.shift();
    if (chunk === undefined) return null;
    this.bytes -= chunk.byteLength;
    this.wakeWriter?.();
    return chunk;
  }

  /** The writer is done: the reader sees EOF after what is queued. */
  close(): void {
    this.closed = true;
    this.wakeReader?.();
  }

  /** The reader is done: the writer's next write fails. */
  abandon(): void {
    this.readerGone = true;
    this.chunks.length = 0;
    this.bytes = 0;
    this.wakeWriter?.();
  }
}

/** Reads all of `input` (a command's stdin or a pipe). */
export async function readAll(input: Input): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for (let c = await input.read(); c !== null; c = await input.read()) parts.push(c);
  return Buffer.concat(parts);
}

/** An Input over fixed bytes. */
export function bytesInput(data: Uint8Array): Input {
  let done = data.byteLength === 0;
  return {
    read: async () => {
      if (done) return null;
      done = true;
      return data;
    },
  };
}

/**
 * An Input over a live source (ExecSpec.stdin as a stream): each chunk as it arrives, racing the
 * kill. `release` ends the source (its `return()`) once the command is over.
 */
export function liveInput(source: AsyncIterable<Uint8Array>, kill: Kill): Input & { release(): void } {
  const it = source[Symbol.asyncIterator]();
  let ended = false;
  return {
    async read() {
      if (ended) return null;
      const r = await kill.race(it.next());
      if (r.done) {
        ended = true;
        return null;
      }
      return r.value;
    },
    release() {
      ended = true;
      void Promise.resolve(it.return?.()).catch(() => undefined);
    },
  };
}
