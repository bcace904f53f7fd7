import { describe, expect, it } from 'vitest';
import { parseDuration } from '../../src/core/duration.js';
import { formatDuration, isWholeSeconds, MAX_DURATION_MS, tryParseDuration } from '../../src/shared/duration.js';
import { EventBus, matches } from '../../src/core/events/bus.js';
import { SbxError } from '../../src/core/errors.js';
import { parseOctalMode, sandboxGlob, sandboxPath } from '../../src/core/sandboxes/paths.js';
import { validateOwnerId } from '../../src/core/admission/owner.js';

describe('durations', () => {
  it('parses Go-style strings', () => {
    expect(tryParseDuration('30s')).toBe(30_000);
    expect(tryParseDuration('5m')).toBe(300_000);
    expect(tryParseDuration('1h30m')).toBe(5_400_000);
    expect(tryParseDuration('250ms')).toBe(250);
    expect(tryParseDuration('1.5h')).toBe(5_400_000);
    expect(tryParseDuration('0')).toBe(0);
    expect(tryParseDuration('0s')).toBe(0);
    expect(tryParseDuration('2h0m0s')).toBe(7_200_000);
    expect(tryParseDuration('-1s')).toBe(-1000);
  });
  it('rejects malformed strings', () => {
    for (const bad of ['', '5', 'm', '1d', '1 h', 'abc', '1h-5m', '5m ago', '.s']) expect(tryParseDuration(bad), bad).toBeNull();
    expect(() => parseDuration('x', 'ttl')).toThrow(SbxError);
    expect(() => parseDuration('x', 'ttl')).toThrow(/ttl: invalid duration/);
  });
  it('renders the long form', () => {
    expect(formatDuration(7_200_000)).toBe('2h0m0s');
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(1500)).toBe('1.5s');
    expect(formatDuration(250)).toBe('250ms');
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(86_400_000)).toBe('24h0m0s');
  });
  it('keeps sub-millisecond precision and renders it as Go does', () => {
    const cases: Array<[string, string]> = [
      ['1us', '1µs'],
      ['1µs', '1µs'],
      ['1.5us', '1.5µs'],
      ['1ns', '1ns'],
      ['999ns', '999ns'],
      ['1000ns', '1µs'],
      ['1ms', '1ms'],
      ['1.5ms', '1.5ms'],
      ['1500us', '1.5ms'],
      ['1.000000001s', '1.000000001s'],
      ['1h0m0.5s', '1h0m0.5s'],
      ['100h30m15.123456789s', '100h30m15.123456789s'],
      ['-1us', '-1µs'],
      ['876000h', '876000h0m0s'],
    ];
    for (const [input, shown] of cases) expect(formatDuration(tryParseDuration(input)!), input).toBe(shown);
    expect(tryParseDuration('1us')).toBeCloseTo(0.001, 12);
    expect(tryParseDuration('1ns')).toBeCloseTo(0.000001, 12);
  });
  it('rejects durations longer than 100 years with a clear message', () => {
    expect(MAX_DURATION_MS).toBe(876_000 * 3_600_000);
    expect(tryParseDuration('876000h')).toBe(MAX_DURATION_MS);
    for (const big of ['876000h1ms', '9999999999999h', '-9999999999999h', `${'9'.repeat(400)}h`]) {
      expect(tryParseDuration(big), big).toBeNull();
    }
    expect(() => parseDuration('9999999999999h', 'ttl')).toThrow(
      /^ttl: duration "9999999999999h" is too long \(the maximum is 876000h, 100 years\)$/,
    );
    const err = (() => {
      try {
        parseDuration('876001h', 'ttl');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(SbxError);
    expect((err as SbxError).code).toBe('bad_request');
    // Still malformed, not too long, when the digits overflow to Infinity.
    expect(() => parseDuration(`${'9'.repeat(400)}h`, 'ttl')).toThrow(/ttl: invalid duration/);
  });
  it('knows whole seconds', () => {
    expect(isWholeSeconds(3000)).toBe(true);
    expect(isWholeSeconds(1500)).toBe(false);
  });
});

describe('sandbox paths', () => {
  it('normalizes absolute paths', () => {
    expect(sandboxPath('/a//b/./c/')).toBe('/a/b/c');
    expect(sandboxPath('/a/b/../c')).toBe('/a/c');
    expect(sandboxPath('/')).toBe('/');
  });
  it('rejects relative, NUL and escaping paths', () => {
    expect(() => sandboxPath('a/b')).toThrow(/absolute/);
    expect(() => sandboxPath('/a\0b')).toThrow(/NUL/);
    expect(() => sandboxPath('/../etc')).toThrow(/escapes/);
    expect(() => sandboxPath('/a/../../etc')).toThrow(/escapes/);
    expect(() => sandboxPath('')).toThrow(/required/);
    expect(() => sandboxGlob('/a/../*')).toThrow(/\.\./);
    expect(sandboxGlob('/a//*.txt')).toBe('/a/*.txt');
  });
  it('parses octal modes', () => {
    expect(parseOctalMode('755')).toBe(0o755);
    expect(parseOctalMode('0644')).toBe(0o644);
    expect(parseOctalMode('1777')).toBe(0o1777);
    for (const bad of ['9', 'rwx', '', '12345', '-1']) expect(() => parseOctalMode(bad), bad).toThrow(/octal/);
  });
});

describe('owner ids', () => {
  it('trims and validates', () => {
    expect(validateOwnerId('  alice ')).toBe('alice');
    expect(validateOwnerId('')).toBeNull();
    expect(validateOwnerId(undefined)).toBeNull();
    expect(() => validateOwnerId('a b')).toThrow(/whitespace/);
    expect(() => validateOwnerId('a/b')).toThrow(/path separators/);
    expect(() => validateOwnerId('a\\b')).toThrow(/path separators/);
    expect(() => validateOwnerId('a\u0001b')).toThrow(/control/);
    expect(() => validateOwnerId('x'.repeat(129))).toThrow(/128/);
    expect(validateOwnerId('x'.repeat(128))).toHaveLength(128);
  });
});

describe('event bus', () => {
  const clock = { now: () => new Date('2026-01-01T00:00:00Z') };
  it('assigns increasing ids, keeps bounded history, replays since an id', () => {
    const bus = new EventBus(clock, 3);
    const seen: number[] = [];
    const off = bus.subscribe((e) => seen.push(e.id));
    for (let i = 0; i < 5; i++) bus.publish({ type: 'sandbox.created', sandbox_id: `sb-${i}` });
    off();
    bus.publish({ type: 'sandbox.destroyed' });
    expect(seen).toEqual([1, 2, 3, 4, 5]);
    expect(bus.recent().map((e) => e.id)).toEqual([4, 5, 6]);
    expect(bus.since(4).map((e) => e.id)).toEqual([5, 6]);
    expect(bus.stats()).toEqual({ subscribers: 0, history_size: 3, events_total: 6 });
  });
  it('filters by kind, wildcard group and sandbox', () => {
    const e = { id: 1, type: 'exec.completed' as const, timestamp: '', sandbox_id: 'sb-a' };
    expect(matches(e, { types: ['exec.*'] })).toBe(true);
    expect(matches(e, { types: ['sandbox.*'] })).toBe(false);
    expect(matches(e, { types: ['exec.completed'], sandbox_id: 'sb-b' })).toBe(false);
    expect(matches(e, {})).toBe(true);
  });
  it('a throwing subscriber does not break publishing', () => {
    const bus = new EventBus(clock);
    bus.subscribe(() => {
      throw new Error('boom');
    });
    expect(() => bus.publish({ type: 'quota.saved' })).not.toThrow();
  });
});
