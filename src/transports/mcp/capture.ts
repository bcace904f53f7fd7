/**
 * Bounded capture of one output stream for the MCP tools: the first quarter of the limit and the
 * last three quarters are kept, the middle is dropped and counted, so an agent sees how a command
 * started and how it ended (where errors usually are) without a flood of bytes.
 */

/** Bytes kept per stream by `exec` and per call by `process_output`. */
export const OUTPUT_LIMIT = 64 * 1024;

export class OutputCapture {
  private readonly headLimit: number;
  private readonly tailLimit: number;
  private readonly head: Buffer[] = [];
  private headLen = 0;
  private tail: Buffer[] = [];
  private tailLen = 0;
  /** Every byte seen. */
  total = 0;

  constructor(readonly limit = OUTPUT_LIMIT) {
    this.headLimit = Math.floor(limit / 4);
    this.tailLimit = limit - this.headLimit;
  }

  push(bytes: Buffer): void {
    this.total += bytes.length;
    let rest = bytes;
    if (this.headLen < this.headLimit) {
      const take = Math.min(this.headLimit - this.headLen, rest.length);
      this.head.push(rest.subarray(0, take));
      this.headLen += take;
      rest = rest.subarray(take);
    }
    if (rest.length === 0) return;
    this.tail.push(rest);
    this.tailLen += rest.length;
    // Trim whole buffers from the front while the rest still fills the tail, then cut the first one.
    while (this.tailLen - this.tail[0]!.length >= this.tailLimit) {
      this.tailLen -= this.tail.shift()!.length;
    }
    if (this.tailLen > this.tailLimit) {
      const cut = this.tailLen - this.tailLimit;
      this.tail[0] = this.tail[0]!.subarray(cut);
      this.tailLen -= cut;
    }
  }

  /** Bytes seen but not kept. */
  get dropped(): number {
    return this.total - this.headLen - this.tailLen;
  }

  /** The kept text (UTF-8, invalid sequences as U+FFFD), with a marker where the middle was dropped. */
  text(name: string): string {
    const head = Buffer.concat(this.head).toString('utf8');
    const tail = Buffer.concat(this.tail).toString('utf8');
    if (this.dropped === 0) return head + tail;
    return `${head}\n[sbx: ${this.dropped} bytes of ${name} dropped here]\n${tail}`;
  }

  /** A sentence about what was dropped, or undefined when nothing was. */
  note(name: string): string | undefined {
    if (this.dropped === 0) return undefined;
    return (
      `${name} was ${this.total} bytes: the first ${this.headLen} and the last ${this.tailLen} are shown, ` +
      `${this.dropped} bytes in the middle were dropped (redirect the output to a file and use read_file, or ` +
      `head/tail/grep, to see the rest)`
    );
  }
}
