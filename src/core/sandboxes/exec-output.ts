/**
 * A buffered exec's output under a cap (spec 2.7 `max_exec_output_mb`): whole chunks are kept up to
 * the first past the cap per stream, and the result is cut there at a character boundary with a
 * note of what was dropped. One rule for a local buffered exec and a worker's `worker.exec`.
 */
import { completePrefix } from '../utf8.js';

type Stream = 'stdout' | 'stderr';
const encoder = new TextEncoder();

/** The parts as one array (the part itself when there is one). */
export function concat(parts: Uint8Array[]): Uint8Array {
  if (parts.length === 1) return parts[0]!;
  const all = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    all.set(p, at);
    at += p.byteLength;
  }
  return all;
}

export class CappedOutput {
  private readonly out = { stdout: [] as Uint8Array[], stderr: [] as Uint8Array[] };
  private readonly held = { stdout: 0, stderr: 0 };
  private readonly size = { stdout: 0, stderr: 0 };

  /** @param max bytes kept per stream */
  constructor(private readonly max: number) {}

  /** True when the chunk must be kept (the caller may account for its bytes first, then `keep` it). */
  wants(stream: Stream, data: Uint8Array): boolean {
    this.size[stream] += data.byteLength;
    return this.held[stream] < this.max;
  }

  keep(stream: Stream, data: Uint8Array): void {
    this.out[stream].push(data);
    this.held[stream] += data.byteLength;
  }

  /** Counts and keeps a chunk in one step (nothing to account for). */
  add(stream: Stream, data: Uint8Array): void {
    if (this.wants(stream, data)) this.keep(stream, data);
  }

  get truncated(): boolean {
    return this.size.stdout > this.max || this.size.stderr > this.max;
  }

  /** A stream's output, cut at the cap with the note when more came. */
  result(stream: Stream): Uint8Array {
    const all = concat(this.out[stream]);
    if (this.size[stream] <= this.max) return all;
    // The cut never splits a character, so text output stays text.
    const kept = all.subarray(0, completePrefix(all.subarray(0, this.max)));
    return concat([kept, encoder.encode(`\n[sbx: output truncated, ${this.size[stream] - kept.byteLength} bytes dropped]\n`)]);
  }
}
