/**
 * In-process `sbx`: runs main(argv) with captured stdout/stderr, a given stdin and env, against a
 * real server. The same code path as the bin, minus the process.
 */
import { Readable, Writable } from 'node:stream';
import { main } from '../../src/cli.js';
import { tempDir } from '../helpers/tmp.js';

export interface SbxRun {
  code: number;
  stdout: string;
  stderr: string;
  stdoutBytes: Buffer;
  stderrBytes: Buffer;
}

export interface RunOptions {
  env?: Record<string, string | undefined>;
  /** Piped stdin content; omitted = an empty pipe. */
  stdin?: string | Buffer;
  /** A live stdin instead (the test writes and ends it while sbx runs); `isTTY`/`setRawMode` as given. */
  stdinStream?: Readable & { isTTY?: boolean; setRawMode?: (on: boolean) => unknown };
  /** Sees stdout as it is written (to act while sbx still runs). */
  onStdout?: (chunk: Buffer, all: () => string) => void;
  /** Gets the stdout sink (e.g. to emit `resize` on a pretend terminal). */
  onStdoutSink?: (sink: Writable & { columns: number; rows: number }) => void;
  /** Pretend stdout is a terminal. */
  tty?: boolean;
  /** Pretend stdin is a terminal (nothing is read). */
  stdinTTY?: boolean;
  cwd?: string;
  signal?: AbortSignal;
}

class Capture extends Writable {
  readonly chunks: Buffer[] = [];
  isTTY: boolean;
  columns = 120;
  rows = 40;
  onChunk?: (chunk: Buffer) => void;
  constructor(tty: boolean) {
    super();
    this.isTTY = tty;
  }
  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.chunks.push(Buffer.from(chunk));
    this.onChunk?.(Buffer.from(chunk));
    cb();
  }
  bytes(): Buffer {
    return Buffer.concat(this.chunks);
  }
}

/** A HOME without a client profile, shared by a test file. */
export const emptyHome = tempDir('sbx-cli-home-');

/** Runs `sbx argv…` in-process. `env` is the whole environment (plus HOME and PATH defaults). */
export async function runSbx(argv: string[], opts: RunOptions = {}): Promise<SbxRun> {
  const stdout = new Capture(Boolean(opts.tty));
  const stderr = new Capture(false);
  if (opts.onStdout) stdout.onChunk = (chunk) => opts.onStdout!(chunk, () => stdout.bytes().toString('utf8'));
  opts.onStdoutSink?.(stdout);
  const stdin =
    opts.stdinStream ?? (Readable.from(opts.stdin === undefined ? [] : [Buffer.from(opts.stdin)]) as Readable & { isTTY?: boolean });
  if (!opts.stdinStream) stdin.isTTY = Boolean(opts.stdinTTY);
  const env = { HOME: emptyHome, PATH: process.env.PATH, ...(opts.env ?? {}) };
  const code = await main(argv, { stdout, stderr, stdin, env, cwd: opts.cwd ?? emptyHome, signal: opts.signal });
  return {
    code,
    stdout: stdout.bytes().toString('utf8'),
    stderr: stderr.bytes().toString('utf8'),
    stdoutBytes: stdout.bytes(),
    stderrBytes: stderr.bytes(),
  };
}

/** `runSbx` bound to a server URL (and optional extra env). */
export function sbxAt(url: string, extraEnv: Record<string, string> = {}) {
  return (argv: string[], opts: RunOptions = {}) => runSbx(argv, { ...opts, env: { SBX_URL: url, ...extraEnv, ...(opts.env ?? {}) } });
}
