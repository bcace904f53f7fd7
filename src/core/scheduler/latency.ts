/** The last N durations of one step (ms), for p50/p99 in diagnostics. Bounded memory, O(N log N) to read. */
export class LatencyWindow {
  private readonly samples: number[] = [];
  private next = 0;
  private total = 0;

  constructor(private readonly size = 1024) {}

  record(ms: number): void {
    this.total++;
    if (this.samples.length < this.size) this.samples.push(ms);
    else this.samples[this.next] = ms;
    this.next = (this.next + 1) % this.size;
  }

  /** How many were ever recorded. */
  get count(): number {
    return this.total;
  }

  /** The p-th percentile (0–100) of the window, rounded to 0.01 ms; 0 before any sample. */
  quantile(p: number): number {
    if (this.samples.length === 0) return 0;
    const sorted = [...this.samples].sort((a, b) => a - b);
    const v = sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
    return Math.round(v * 100) / 100;
  }
}
