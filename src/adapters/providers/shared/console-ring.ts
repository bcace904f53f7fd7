import { TextDecoder } from 'node:util';

const DEFAULT_MAX_LINES = 1000;
/** A line longer than this is broken, so output without newlines cannot grow memory without bound. */
const MAX_LINE_CHARS = 16 * 1024;

/**
 * Bounded console of one runtime: the last `maxLines` lines of output, oldest first. Output from
 * several sources (stdout, stderr) is split separately so a partial line of one is never glued to
 * the other; `flush` ends a source's partial line (e.g. when an exec finishes).
 */
export class ConsoleRing {
  /** Circular buffer: `start` is the oldest line once the ring is full. */
  private readonly lines: string[] = [];
  private start = 0;
  private readonly partial = new Map<string, { text: string; decoder: TextDecoder }>();

  constructor(private readonly maxLines = DEFAULT_MAX_LINES) {}

  /** Appends a chunk; complete lines enter the ring, a trailing partial line waits for more. */
  append(chunk: string | Uint8Array, source = 'out'): void {
    let state = this.partial.get(source);
    if (!state) {
      state = { text: '', decoder: new TextDecoder() };
      this.partial.set(source, state);
    }
    const text = state.text + (typeof chunk === 'string' ? chunk : state.decoder.decode(chunk, { stream: true }));
    let from = 0;
    for (let nl = text.indexOf('\n'); nl !== -1; nl = text.indexOf('\n', from)) {
      this.pushLong(text.slice(from, nl));
      from = nl + 1;
    }
    let rest = text.slice(from);
    while (rest.length > MAX_LINE_CHARS) {
      this.push(rest.slice(0, MAX_LINE_CHARS));
      rest = rest.slice(MAX_LINE_CHARS);
    }
    state.text = rest;
  }

  /** Ends the partial line of `source` (all sources when omitted). */
  flush(source?: string): void {
    for (const [key, state] of this.partial) {
      if (source !== undefined && key !== source) continue;
      const rest = state.text + state.decoder.decode();
      if (rest.length > 0) this.pushLong(rest);
      this.partial.delete(key);
    }
  }

  /** The last `n` complete lines, oldest first. */
  tail(n: number): string[] {
    if (n <= 0) return [];
    const ordered = this.start === 0 ? this.lines : [...this.lines.slice(this.start), ...this.lines.slice(0, this.start)];
    return ordered.slice(-Math.min(n, ordered.length));
  }

  get size(): number {
    return this.lines.length;
  }

  private pushLong(line: string): void {
    for (let i = MAX_LINE_CHARS; i < line.length; i += MAX_LINE_CHARS) this.push(line.slice(i - MAX_LINE_CHARS, i));
    this.push(line.slice(Math.max(0, Math.ceil(line.length / MAX_LINE_CHARS) - 1) * MAX_LINE_CHARS));
  }

  private push(line: string): void {
    const clean = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (this.lines.length < this.maxLines) {
      this.lines.push(clean);
      return;
    }
    this.lines[this.start] = clean;
    this.start = (this.start + 1) % this.maxLines;
  }
}
