import { describe, expect, it } from 'vitest';
import { LatencyWindow } from '../../src/core/scheduler/latency.js';

describe('latency window', () => {
  it('gives 0 before any sample, then percentiles of the last N only', () => {
    const w = new LatencyWindow(100);
    expect([w.count, w.quantile(50), w.quantile(99)]).toEqual([0, 0, 0]);
    for (let i = 1; i <= 100; i++) w.record(i);
    expect([w.count, w.quantile(50), w.quantile(99)]).toEqual([100, 51, 100]);
    // 100 more, all 1000: the first hundred have left the window.
    for (let i = 0; i < 100; i++) w.record(1000);
    expect([w.count, w.quantile(50), w.quantile(0)]).toEqual([200, 1000, 1000]);
  });
});
