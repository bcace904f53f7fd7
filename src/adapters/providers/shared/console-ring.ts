import type { ConsoleLog, ConsoleQuery } from '../../../core/ports/index.js';
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
 *
 * Every complete line gets the next number of a count that only grows (the first line is 1), so a
 * reader can ask for the lines after the last one it saw: content cannot tell repeated lines apart.
 */
export class ConsoleRing {
  /** Circular buffer: `start` is the oldest line once the ring is full. */
  private readonly lines: string[] = [];
  private start = 0;
  /** Number of the newest line: every line recorded so far, including those pushed out or skipped. */
  private recorded = 0;
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
          // Skipped lines still take their numbers, so cursors stay a count of lines recorded.
          this.recorded += countNewlines(part, nl + 1);
          for (let j = 0; j < i; j++) this.recorded += countNewlines(parts[j]!, parts[j]!.length);
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
    return this.ordered().slice(-Math.min(n, this.lines.length));
  }

  /**
   * The last `lines` lines, or with `after` the first `lines` lines numbered above it, and the
   * cursor for the next read. A cursor beyond the newest line comes from an earlier ring of the
   * runtime (a server restart, a ring dropped to bound memory): reading starts over from the
   * oldest line kept. Lines pushed out of the ring before a reader came back are simply absent.
   */
  read(query: ConsoleQuery): ConsoleLog {
    this.settle();
    const n = Math.max(0, query.lines);
    if (query.after === undefined)
      return { lines: n > 0 ? this.ordered().slice(-Math.min(n, this.lines.length)) : [], cursor: this.recorded };
    const after = query.after > this.recorded ? 0 : query.after;
    const oldest = this.recorded - this.lines.length + 1;
    const from = Math.max(0, after - oldest + 1);
    const lines = n > 0 ? this.ordered().slice(from, from + n) : [];
    return { lines, cursor: lines.length > 0 ? oldest + from + lines.length - 1 : after };
  }

  /** Number of the newest complete line (0 before the first). */
  get cursor(): number {
    this.settle();
    return this.recorded;
  }

  private ordered(): string[] {
    return this.start === 0 ? this.lines : [...this.lines.slice(this.start), ...this.lines.slice(0, this.start)];
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
    this.recorded++;
    const clean = line.endsWith('\r') ? line.slice(0, -1) : line;
    if (this.lines.length < this.maxLines) {
      this.lines.push(clean);
      return;
    }
    this.lines[this.start] = clean;
    this.start = (this.start + 1) % this.maxLines;
  }
}

/** Newlines in `text` before index `end`. */
function countNewlines(text: string, end: number): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < end; i = text.indexOf('\n', i + 1)) n++;
  return n;
}
