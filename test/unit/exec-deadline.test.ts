import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_TIMER_MS, startDeadline } from '../../src/core/sandboxes/exec.js';

// Unit tier: the steps run on fake timers, moved by hand; only the overflow check uses real ones.
beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
});
afterEach(() => {
  vi.useRealTimers();
});
const sleep = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe('startDeadline', () => {
  it('re-arms in steps: a deadline longer than one timer fires once, after the whole delay', async () => {
    const started = Date.now();
    let firedAt = 0;
    let fired = 0;
    startDeadline(
      130,
      () => {
        fired++;
        firedAt = Date.now() - started;
      },
      40,
    );
    await sleep(80);
    expect(fired).toBe(0);
    await sleep(250);
    expect(fired).toBe(1);
    expect(firedAt).toBeGreaterThanOrEqual(120);
  });

  it('cancels between steps', async () => {
    let fired = false;
    const cancel = startDeadline(100, () => (fired = true), 30);
    await sleep(45);
    cancel();
    await sleep(150);
    expect(fired).toBe(false);
  });

  it('holds a delay past 2^31-1 ms without firing or a TimeoutOverflowWarning', async () => {
    // Node's own timers: the warning is theirs. It is emitted on the next tick; a few turns of the loop suffice.
    vi.useRealTimers();
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    let fired = false;
    const cancel = startDeadline(MAX_TIMER_MS * 3, () => (fired = true));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    cancel();
    process.off('warning', onWarning);
    expect(fired).toBe(false);
    expect(warnings).toEqual([]);
  });
});
