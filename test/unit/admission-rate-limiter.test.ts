import { describe, expect, it } from 'vitest';
import { RateLimiter, type RateLimitSettings } from '../../src/core/admission/rate-limiter.js';
import type { Clock } from '../../src/core/ports/index.js';

/** A Clock the test advances by hand, so refill and eviction are exact. */
class StepClock implements Clock {
  t = Date.parse('2024-01-01T00:00:00Z');
  now(): Date {
    return new Date(this.t);
  }
}

const base: RateLimitSettings = {
  enabled: true,
  requests_per_minute: 60,
  burst: 3,
  key_by: 'owner',
  bucket_ttl_ms: 60_000,
  cleanup_interval_ms: 10_000,
};

describe('rate limiter token buckets', () => {
  it('allows a burst, then limits with Retry-After until tokens refill', () => {
    const clock = new StepClock();
    const rl = new RateLimiter(base, clock);
    expect([rl.take('k'), rl.take('k'), rl.take('k')].map((d) => d.remaining)).toEqual([2, 1, 0]);
    const limited = rl.take('k');
    expect(limited).toEqual({ allowed: false, limit: 60, remaining: 0, retry_after_s: 1, first_denial: true });
    expect(rl.take('k').first_denial).toBe(false);
    clock.t += 1000; // 60/min = one token per second
    expect(rl.take('k')).toMatchObject({ allowed: true, remaining: 0, first_denial: false });
    // Refused again after an allowed request: a new first denial.
    expect(rl.take('k')).toMatchObject({ allowed: false, first_denial: true });
    clock.t += 10 * 60_000; // refill is capped at burst
    expect(rl.take('k').remaining).toBe(2);
  });

  it('computes Retry-After from the refill rate (integer seconds, at least 1)', () => {
    const clock = new StepClock();
    const rl = new RateLimiter({ ...base, requests_per_minute: 2, burst: 1 }, clock);
    expect(rl.take('k').allowed).toBe(true);
    expect(rl.take('k').retry_after_s).toBe(30);
    clock.t += 29_500;
    expect(rl.take('k').retry_after_s).toBe(1);
  });

  it('keeps keys apart and evicts idle buckets after bucket_ttl', () => {
    const clock = new StepClock();
    const rl = new RateLimiter(base, clock);
    for (let i = 0; i < 4; i++) rl.take('a');
    expect(rl.take('b').allowed).toBe(true);
    clock.t += 30_000;
    rl.take('b');
    clock.t += 30_000; // a idle 60 s, b idle 30 s
    expect(rl.prune()).toBe(1);
    expect(rl.stats()).toEqual({
      enabled: true,
      requests_per_minute: 60,
      burst: 3,
      key_by: 'owner',
      active_buckets: 1,
      allowed_total: 5,
      limited_total: 1,
      evicted_total: 1,
      bucket_ttl: '1m0s',
      cleanup_interval: '10s',
    });
  });

  it('start/stop manage one unref’d timer', () => {
    const rl = new RateLimiter({ ...base, cleanup_interval_ms: 5 }, new StepClock());
    rl.start();
    rl.start();
    rl.stop();
    rl.stop();
    expect(rl.stats().active_buckets).toBe(0);
  });
});
