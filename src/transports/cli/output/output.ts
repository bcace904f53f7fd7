/**
 * The only place that writes to stdout and stderr. Human output (chalk tables, a spinner on stderr
 * for waits over 300 ms) or `--json` (API JSON on stdout); errors are one line `sbx: <message>`.
 */
import { Chalk, type ChalkInstance } from 'chalk';
import { startSpinner } from './spinner.js';
import { renderFields, renderTable, type Column } from './table.js';

/** A writable the CLI can print to (process.stdout, a test buffer). */
export interface Sink {
  write(chunk: string | Uint8Array, cb?: (err?: Error | null) => void): boolean;
  once?(event: 'drain', listener: () => void): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface OutputOptions {
  stdout: Sink;
  stderr: Sink;
  /** `--json`: machine output on stdout. */
  json: boolean;
  /** `--no-color` / NO_COLOR turn this off; it is also off when stdout is not a TTY. */
  color: boolean;
}

export class Output {
  readonly json: boolean;
  /** Whether stdout is a terminal (human-friendly output, `sbx spawn` summary). */
  readonly isTTY: boolean;
  readonly errIsTTY: boolean;
  readonly color: boolean;
  /** Styles for stdout text (no-ops when colour is off). */
  readonly c: ChalkInstance;
  private readonly out: Sink;
  private readonly err: Sink;

  constructor(opts: OutputOptions) {
    this.out = opts.stdout;
    this.err = opts.stderr;
    this.json = opts.json;
    this.isTTY = Boolean(opts.stdout.isTTY);
    this.errIsTTY = Boolean(opts.stderr.isTTY);
    this.color = opts.color && this.isTTY;
    this.c = new Chalk({ level: this.color ? 1 : 0 });
  }

  /** Width of the terminal (for tables), or a generous default when piped. */
  get columns(): number {
    return this.out.columns && this.out.columns > 20 ? this.out.columns : 160;
  }

  /** Writes text to stdout as is. */
  write(text: string): void {
    this.out.write(text);
  }

  /** Writes one line to stdout. */
  line(text = ''): void {
    this.out.write(`${text}\n`);
  }

  /** Writes bytes to stdout or stderr, waiting when the reader is slow (exec output, file cat). */
  async raw(stream: 'stdout' | 'stderr', data: string | Uint8Array): Promise<void> {
    const sink = stream === 'stdout' ? this.out : this.err;
    if (!sink.write(data) && sink.once) {
      await new Promise<void>((resolve) => sink.once!('drain', resolve));
    }
  }

  /** `--json` output: the API value, pretty-printed, on stdout. */
  printJson(value: unknown): void {
    this.out.write(`${JSON.stringify(value, null, 2)}\n`);
  }

  /** One compact JSON value per line (streams: `watch --json`). */
  jsonLine(value: unknown): void {
    this.out.write(`${JSON.stringify(value)}\n`);
  }

  /** A table on stdout; the header row is bold when colour is on. */
  table<T>(columns: ReadonlyArray<Column<T>>, rows: readonly T[]): void {
    this.out.write(renderTable(columns, rows, this.c, this.columns));
  }

  /** `key: value` lines on stdout. */
  fields(pairs: ReadonlyArray<readonly [string, string]>): void {
    this.out.write(renderFields(pairs, this.c));
  }

  /** A human note on stderr (progress, hints); never part of the machine-readable output. */
  note(text: string): void {
    this.err.write(`${text}\n`);
  }

  warn(text: string): void {
    this.err.write(`sbx: warning: ${text}\n`);
  }

  /** The error line: `sbx: <message>` on stderr. */
  error(message: string): void {
    this.err.write(`sbx: ${message.replace(/\s*\n\s*/g, ' ').trim()}\n`);
  }

  /** Runs `work` with a spinner on stderr if it takes longer than 300 ms (TTY only). */
  async spin<T>(label: string, work: Promise<T> | (() => Promise<T>)): Promise<T> {
    const stop = this.errIsTTY ? startSpinner(this.err, label) : () => undefined;
    try {
      return await (typeof work === 'function' ? work() : work);
    } finally {
      stop();
    }
  }

  /** The raw streams, for delegates that print on their own (`sbx serve`). */
  get streams(): { stdout: NodeJS.WritableStream; stderr: NodeJS.WritableStream } {
    return { stdout: this.out as unknown as NodeJS.WritableStream, stderr: this.err as unknown as NodeJS.WritableStream };
  }

  /** Resolves once everything written so far has been handed to the OS. */
  async flush(): Promise<void> {
    await Promise.all(
      [this.out, this.err].map(
        (s) =>
          new Promise<void>((resolve) => {
            try {
              s.write('', () => resolve());
            } catch {
              resolve();
            }
          }),
      ),
    );
  }
}
