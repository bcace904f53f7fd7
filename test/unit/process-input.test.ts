/**
 * A background process's live input (core/sandboxes/process-input.ts): `…/resize` answers once the
 * provider applied the size (it calls the control's `applied`), when the process ends, or after a
 * bounded wait for a provider that does not tell. Fake timers; no process, no port.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { ExecControl } from '../../src/core/ports/index.js';
import { consumeControls } from '../../src/adapters/providers/shared/live-input.js';
import { ProcessInput } from '../../src/core/sandboxes/process-input.js';

/** Resolves with whether `p` settled by now (after the microtasks queued so far). */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await vi.advanceTimersByTimeAsync(0);
  return done;
}

describe('ProcessInput.resize', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('answers once the provider applied the size, not before', async () => {
    vi.useFakeTimers();
    const input = new ProcessInput('p-1', true, true);
    const it = input.controls[Symbol.asyncIterator]();
    const resized = input.resize(120, 40);
    const c = (await it.next()).value as Extract<ExecControl, { type: 'resize' }>;
    expect(c).toMatchObject({ type: 'resize', cols: 120, rows: 40 });
    expect(await settled(resized)).toBe(false);
    c.applied!();
    expect(await settled(resized)).toBe(true);
  });

  it('answers when the process ends, or after 5 s for a provider that never says', async () => {
    vi.useFakeTimers();
    const ending = new ProcessInput('p-2', false, true);
    const a = ending.resize(80, 24);
    expect(await settled(a)).toBe(false);
    ending.end();
    expect(await settled(a)).toBe(true);
    // Ended: a later resize answers at once.
    expect(await settled(ending.resize(80, 24))).toBe(true);

    const silent = new ProcessInput('p-3', false, true);
    const b = silent.resize(80, 24);
    await vi.advanceTimersByTimeAsync(4_999);
    expect(await settled(b)).toBe(false);
    await vi.advanceTimersByTimeAsync(1);
    expect(await settled(b)).toBe(true);
  });

  it('refuses a process without a terminal and a size out of range', async () => {
    await expect(new ProcessInput('p-4', true, false).resize(80, 24)).rejects.toMatchObject({ code: 'bad_request' });
    await expect(new ProcessInput('p-5', true, true).resize(0, 24)).rejects.toMatchObject({ code: 'bad_request' });
  });
});

describe('consumeControls (the providers’ side)', () => {
  it('calls a resize’s applied after applying it, also when applying it failed', async () => {
    const input = new ProcessInput('p-6', false, true);
    const seen: string[] = [];
    let fail = false;
    const pump = consumeControls(input.controls, async (c) => {
      if (c.type !== 'resize') return;
      await Promise.resolve();
      seen.push(`${c.cols}x${c.rows}`);
      if (fail) throw new Error('engine said no');
    });
    await input.resize(100, 30);
    expect(seen).toEqual(['100x30']);
    fail = true;
    await input.resize(120, 40);
    expect(seen).toEqual(['100x30', '120x40']);
    pump.stop();
  });
});
