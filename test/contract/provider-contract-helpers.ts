import { expect } from 'vitest';
import { SbxError, type ErrorCode } from '../../src/core/errors.js';
import type { ExecEvent, ExecSpec } from '../../src/core/ports/index.js';

/** Helpers of the Provider contract suite (provider.contract.ts). */

export interface Collected {
  events: ExecEvent[];
  stdoutBytes: Buffer;
  stdout: string;
  stderr: string;
  exitCode: number | null;
}

export const never: AbortSignal = new AbortController().signal;
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Rejects when `p` has not settled within `ms`: a provider must never hang the caller. */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([p, limit]).finally(() => clearTimeout(timer));
}

/** Drains an exec stream and checks its shape: at most one `exit`, and it is the last item. */
export async function collect(iter: AsyncIterable<ExecEvent>): Promise<Collected> {
  const events: ExecEvent[] = [];
  for await (const ev of iter) events.push(ev);
  const exits = events.filter((e) => e.stream === 'exit');
  expect(exits.length, 'at most one exit event').toBeLessThanOrEqual(1);
  if (exits[0]) expect(events[events.length - 1], 'exit is the last event').toBe(exits[0]);
  const bytes = (type: 'stdout' | 'stderr') => Buffer.concat(events.flatMap((e) => (e.stream === type ? [Buffer.from(e.data)] : [])));
  const stdoutBytes = bytes('stdout');
  return {
    events,
    stdoutBytes,
    stdout: stdoutBytes.toString('utf8'),
    stderr: bytes('stderr').toString('utf8'),
    exitCode: exits[0]?.stream === 'exit' ? exits[0].exit_code : null,
  };
}

/** A shell-mode spec running in /workspace, so relative paths land inside the sandbox for every provider. */
export function sh(command: string, extra: Partial<ExecSpec> = {}): ExecSpec {
  return { command, args: [], mode: 'shell', env: {}, workdir: '/workspace', ...extra };
}

export async function expectSbxError(p: Promise<unknown>, codes: ErrorCode[], what: string): Promise<SbxError> {
  const outcome = await within(
    p.then(
      () => new Error(`${what}: expected an SbxError, but it succeeded`),
      (err: unknown) => err,
    ),
    10_000,
    what,
  );
  expect(outcome, what).toBeInstanceOf(SbxError);
  expect(codes, `${what}: code ${(outcome as SbxError).code}`).toContain((outcome as SbxError).code);
  return outcome as SbxError;
}

/**
 * A live source the test feeds by hand (stdin chunks, controls): `push` now, `end` later.
 * `released` resolves once the consumer ended it or called `return()`.
 */
export class LiveChunks<T = Uint8Array> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((r: IteratorResult<T, undefined>) => void) | null = null;
  private ended = false;
  private release!: () => void;
  readonly released = new Promise<void>((resolve) => (this.release = resolve));

  push(item: T | string): void {
    const value = (typeof item === 'string' ? Buffer.from(item) : item) as T;
    const w = this.waiting;
    this.waiting = null;
    if (w) w({ value, done: false });
    else this.items.push(value);
  }

  end(): void {
    this.ended = true;
    const w = this.waiting;
    this.waiting = null;
    w?.({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterator<T, undefined> {
    return {
      next: () => {
        const value = this.items.shift();
        if (value !== undefined) return Promise.resolve({ value, done: false });
        if (this.ended) {
          this.release();
          return Promise.resolve({ value: undefined, done: true });
        }
        return new Promise((resolve) => (this.waiting = resolve));
      },
      return: () => {
        this.end();
        this.release();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
