import { describe, expect, it } from 'vitest';
import { parseIdempotencyKey, requestHash } from '../../src/core/sandboxes/idempotency.js';

describe('Idempotency-Key', () => {
  it('takes 1–128 printable ASCII characters with no blank at either end', () => {
    expect(parseIdempotencyKey(undefined)).toBeUndefined();
    for (const ok of ['a', 'job 7/run:3', 'x'.repeat(128), '~!@#$%^&*()']) expect(parseIdempotencyKey(ok)).toBe(ok);
    for (const bad of ['', ' a', 'a ', 'x'.repeat(129), 'a\tb', 'a\nb', 'é', '\x7f'])
      expect(() => parseIdempotencyKey(bad), JSON.stringify(bad)).toThrow(/printable ASCII/);
    expect(parseIdempotencyKey(['first', 'second'])).toBe('first');
  });

  it('hashes the route and the body, whatever the order of its keys', () => {
    expect(requestHash('spawn', { a: 1, b: { c: 2, d: [1, 2] } })).toBe(requestHash('spawn', { b: { d: [1, 2], c: 2 }, a: 1 }));
    expect(requestHash('spawn', { a: 1 })).not.toBe(requestHash('template:x', { a: 1 }));
    expect(requestHash('spawn', { d: [1, 2] })).not.toBe(requestHash('spawn', { d: [2, 1] }));
    expect(requestHash('spawn', undefined)).toBe(requestHash('spawn', {}));
  });
});
