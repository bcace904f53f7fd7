import { Utf8Decoder } from '../../../core/utf8.js';

const DEFAULT_MAX_LINES = 1000;
/** A line longer than this is broken, so output without newlines cannot grow memory without bound. */
const MAX_LINE_CHARS = 16 * 1024;
/** Characters of one source gathered before they are split into lines. */
const BATCH_CHARS = 256 * 1024;

/**
 * Bounded console of one runtime: the last `maxLines` lines of output, oldest first. Output from
 * several sources (stdout, stderr) is split separately so a partial line of one is never glued to
 * the other; `flush` ends a source's partial line (e.g. when an exec finishes).
 */
export class ConsoleRing {
  /** Circular buffer: `start` is the oldest line once the ring is full. */
  private readonly lines: string[] = [];
  private start = 0;
  private readonly partial = new Map<string, { text: string; decoder: Utf8Decoder }>();
  /**
   * Text of consecutive chunks from one source, not yet split into lines. A large output is split
   * a batch at a time, and only the lines of a batch that can still be in the ring are split at
   * all; a chunk from another source ends the batch first, so lines keep their order of arrival.
   */
  private batch: { source: string; parts: string[]; chars: number } | undefined;

  constructor(private readonly maxLines = DEFAULT_MAX_LINES) {}

  /** Appends a chunk; complete lines enter the ring, a trailing partial line waits for more. */
  append(chunk: string | Uint8Array, source = 'out'): void {
    let state = this.partial.get(source);
    if (!state) {
      state = { text: '', decoder: new Utf8Decoder() };
      this.partial.set(source, state);
    }
    const text = typeof chunk === 'string' ? chunk : state.decoder.write(chunk);
    if (text.length === 0) return;
    if (this.batch && this.batch.source !== source) this.settle();
    this.batch ??= { source, parts: [], chars: 0 };
    this.batch.parts.push(text);
    this.batch.chars += text.length;
    if (this.batch.chars >= BATCH_CHARS) this.settle();
  }

  /** Ends the partial line of `source` (all sources when omitted). */
  flush(source?: string): void {
    this.settle();
    for (const [key, state] of this.partial) {
      if (source !== undefined && key !== source) continue;
      const rest = state.text + state.decoder.end();
      if (rest.length > 0) this.pushLong(rest);
      this.partial.delete(key);
    }
  }

  /** Splits the pending batch into lines. */
  private settle(): void {
    const batch = this.batch;
    if (!batch) return;
    this.batch = undefined;
    const state = this.partial.get(batch.source)!;
    const { parts } = batch;
    // Lines before the last `maxLines` complete ones would only be pushed out again: find where
    // they end, counting newlines from the end, and split only what comes after.
    let first = 0;
    let text = state.text;
    let seen = 0;
    search: for (let i = parts.length - 1; i >= 0; i--) {
      const part = parts[i]!;
      for (let nl = part.lastIndexOf('\n'); nl !== -1; nl = nl > 0 ? part.lastIndexOf('\n', nl - 1) : -1) {
        if (++seen > this.maxLines) {
          first = i;
          parts[i] = part.slice(nl + 1);
          text = '';
          break search;
        }
      }
    }
    for (let i = first; i < parts.length; i++) text = this.split(text + parts[i]!);
    state.text = text;
  }

  /** Pushes the complete lines of `text`; returns the partial line left at its end. */
  private split(text: string): string {
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
    return rest;
  }

  /** The last `n` complete lines, oldest first. */
  tail(n: number): string[] {
    this.settle();
    if (n <= 0) return [];
    const ordered = this.start === 0 ? this.lines : [...this.lines.slice(this.start), ...this.lines.slice(0, this.start)];
    return ordered.slice(-Math.min(n, ordered.length));
  }

  get size(): number {
    this.settle();
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
