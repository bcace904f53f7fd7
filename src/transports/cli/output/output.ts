/**
 * The only place that writes to stdout and stderr. Human output (chalk tables, a spinner on stderr
 * for waits over 300 ms) or `--json` (API JSON on stdout); errors are one line `sbx: <message>`.
 * The plain writing (bytes, lines, JSON, the error line, flush) is `StreamOutput`; this adds colour.
 */
import { Chalk, type ChalkInstance } from 'chalk';
import { startSpinner } from './spinner.js';
import { type Sink, StreamOutput } from './stream-output.js';
import { renderFields, renderTable, type Column } from './table.js';

export type { Sink };

export interface OutputOptions {
  stdout: Sink;
  stderr: Sink;
  /** `--json`: machine output on stdout. */
  json: boolean;
  /** `--no-color` / NO_COLOR turn this off; it is also off when stdout is not a TTY. */
  color: boolean;
}

export class Output extends StreamOutput {
  readonly color: boolean;
  /** Styles for stdout text (no-ops when colour is off). */
  readonly c: ChalkInstance;

  constructor(opts: OutputOptions) {
    super(opts);
    this.color = opts.color && this.isTTY;
    this.c = new Chalk({ level: this.color ? 1 : 0 });
  }

  /** A table on stdout; the header row is bold when colour is on. */
  table<T>(columns: ReadonlyArray<Column<T>>, rows: readonly T[]): void {
    this.out.write(renderTable(columns, rows, this.c, this.columns));
  }

  /** `key: value` lines on stdout. */
  fields(pairs: ReadonlyArray<readonly [string, string]>): void {
    this.out.write(renderFields(pairs, this.c));
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
}
