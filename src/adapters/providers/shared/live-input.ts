import type { ExecControl } from '../../../core/ports/index.js';

/** What a stdin pump writes to: a child's stdin pipe, a hijacked engine stream. */
export interface StdinSink {
  write(chunk: Buffer): boolean;
  end(): unknown;
  once(event: 'drain' | 'close' | 'error', listener: () => void): unknown;
  removeListener(event: 'drain' | 'close' | 'error', listener: () => void): unknown;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
}

export interface Pump {
  /** Stops pulling and releases the source (its `return()`); idempotent, never waits. */
  stop(): void;
}

function waitWritable(sink: StdinSink): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      sink.removeListener('drain', done);
      sink.removeListener('close', done);
      sink.removeListener('error', done);
      resolve();
    };
    sink.once('drain', done);
    sink.once('close', done);
    sink.once('error', done);
  });
}

/**
 * Pulls a live stdin stream into `sink` chunk by chunk as it arrives, waiting when the sink is
 * full (a command that does not read slows the producer instead of growing a buffer), and ends
 * the sink (EOF for the command) when the stream ends or fails.
 */
export function pumpStdin(source: AsyncIterable<Uint8Array>, sink: StdinSink): Pump {
  const it = source[Symbol.asyncIterator]();
  let stopped = false;
  const closed = () => sink.destroyed || sink.writableEnded;
  void (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (stopped || closed()) return;
        if (r.done) break;
        const chunk = r.value;
        if (chunk.byteLength === 0) continue;
        if (!sink.write(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength))) await waitWritable(sink);
      }
    } catch {
      // A failed source is the end of stdin.
    }
    if (!stopped && !closed()) {
      try {
        sink.end();
      } catch {
        // The command is gone; nothing to tell it.
      }
    }
  })();
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      void Promise.resolve()
        .then(() => it.return?.())
        .catch(() => undefined);
    },
  };
}

/**
 * Applies every control request as it arrives until stopped; errors of one request are ignored. A
 * resize's `applied` is called once it was applied (or failed), so its caller can answer after it.
 */
export function consumeControls(controls: AsyncIterable<ExecControl>, apply: (c: ExecControl) => void | Promise<void>): Pump {
  const it = controls[Symbol.asyncIterator]();
  let stopped = false;
  void (async () => {
    try {
      for (;;) {
        const r = await it.next();
        if (stopped || r.done) return;
        try {
          await apply(r.value);
        } catch {
          // A resize or signal that could not be delivered changes nothing else.
        } finally {
          if (r.value.type === 'resize') r.value.applied?.();
        }
      }
    } catch {
      // The control stream failed: no more controls.
    }
  })();
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      void Promise.resolve()
        .then(() => it.return?.())
        .catch(() => undefined);
    },
  };
}

/** True for a live stdin stream (as opposed to bytes given up front). */
export function isLiveStdin(stdin: Uint8Array | AsyncIterable<Uint8Array> | undefined): stdin is AsyncIterable<Uint8Array> {
  return typeof stdin === 'object' && stdin !== null && Symbol.asyncIterator in stdin;
}
