import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InflightBudget } from '../../src/transports/http/inflight.js';
import { outputBudget } from '../../src/transports/http/output-budget.js';

const response = () => new EventEmitter() as unknown as ServerResponse & EventEmitter;

describe('buffered exec output in the in-flight budget', () => {
  beforeEach(() => void vi.useFakeTimers());
  afterEach(() => void vi.useRealTimers());

  it('an older exec waiting for room is woken by the newer one giving its bytes back, with no timer', async () => {
    const budget = new InflightBudget(100);
    const olderRes = response();
    const newerRes = response();
    const older = outputBudget(olderRes, budget)!;
    const newer = outputBudget(newerRes, budget)!;
    expect(older.take(10)).toBe(true); // 40 bytes with its copies
    expect(newer.take(12)).toBe(true); // 48
    const waiting = older.take(5); // 20 more: does not fit, and a newer exec exists
    expect(waiting).toBeInstanceOf(Promise);
    let settled: boolean | undefined;
    void (waiting as Promise<boolean>).then((v) => (settled = v));
    await Promise.resolve();
    expect(settled).toBeUndefined();
    newerRes.emit('close');
    await vi.advanceTimersByTimeAsync(0); // microtasks only: the backstop timer (1 s) has not run
    expect(settled).toBe(true);
    expect(budget.inflight).toBe(60);
    olderRes.emit('close');
    expect(budget.inflight).toBe(0);
  });

  it('the newest exec gives way: false, and its bytes are back at once', () => {
    const budget = new InflightBudget(100);
    const older = outputBudget(response(), budget)!;
    const newerRes = response();
    const newer = outputBudget(newerRes, budget)!;
    expect(older.take(20)).toBe(true); // 80
    expect(newer.take(2)).toBe(true); // 88
    return expect(Promise.resolve(newer.take(10)))
      .resolves.toBe(false)
      .then(() => expect(budget.inflight).toBe(80));
  });

  it('room given back by another request (an upload) wakes a waiting exec', async () => {
    const budget = new InflightBudget(100);
    expect(budget.take(70)).toBe(true); // an upload in flight
    const older = outputBudget(response(), budget)!;
    const newer = outputBudget(response(), budget)!;
    expect(newer.take(1)).toBe(true); // 4
    let settled: boolean | undefined;
    void Promise.resolve(older.take(10)).then((v) => (settled = v));
    await Promise.resolve();
    expect(settled).toBeUndefined();
    budget.give(70);
    await vi.advanceTimersByTimeAsync(0);
    expect(settled).toBe(true);
    expect(budget.inflight).toBe(44);
  });
});
