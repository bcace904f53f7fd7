/**
 * The plain half of the CLI's output: bytes and lines to stdout and stderr, `--json` values, the
 * `sbx: <message>` error line, flushing. No colour library: the `sbx exec` fast path (fast-exec.ts)
 * prints through it alone; `Output` (output.ts) extends it with chalk tables and the spinner.
 */

/** A writable the CLI can print to (process.stdout, a test buffer). */
export interface Sink {
  write(chunk: string | Uint8Array, cb?: (err?: Error | null) => void): boolean;
  once?(event: 'drain', listener: () => void): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface StreamOutputOptions {
  stdout: Sink;
  stderr: Sink;
  /** `--json`: machine output on stdout. */
  json: boolean;
}

export class StreamOutput {
  readonly json: boolean;
  protected readonly out: Sink;
  protected readonly err: Sink;

  constructor(opts: StreamOutputOptions) {
    this.out = opts.stdout;
    this.err = opts.stderr;
    this.json = opts.json;
  }

  /** Whether stdout is a terminal (human-friendly output, `sbx spawn` summary); asked only when needed (a lazy sink). */
  get isTTY(): boolean {
    return Boolean(this.out.isTTY);
  }

  get errIsTTY(): boolean {
    return Boolean(this.err.isTTY);
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
