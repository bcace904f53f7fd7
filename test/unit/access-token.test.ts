import { describe, expect, it } from 'vitest';
import { accessTokenMatches, accessTokenOf } from '../../src/core/auth/access-token.js';

describe('envd access tokens (DESIGN.md §14)', () => {
  const secret = 'installation-secret-0123456789';
  const seed = '00112233445566778899aabbccddeeff';

  it('derives one stable token per sandbox, secret and seed', () => {
    const t = accessTokenOf(secret, 'sb-1', seed);
    expect(t).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(accessTokenOf(secret, 'sb-1', seed)).toBe(t);
    expect(accessTokenOf(secret, 'sb-2', seed)).not.toBe(t);
    expect(accessTokenOf('another-secret', 'sb-1', seed)).not.toBe(t);
    expect(accessTokenOf(secret, 'sb-1', `${seed.slice(0, -1)}0`)).not.toBe(t);
    expect(t).not.toContain(seed);
  });

  it('matches only the exact token of that sandbox; a sandbox without a seed matches nothing', () => {
    const t = accessTokenOf(secret, 'sb-1', seed);
    expect(accessTokenMatches(secret, 'sb-1', seed, t)).toBe(true);
    expect(accessTokenMatches(secret, 'sb-2', seed, t)).toBe(false);
    expect(accessTokenMatches(secret, 'sb-1', seed, `${t}x`)).toBe(false);
    expect(accessTokenMatches(secret, 'sb-1', seed, t.slice(0, -1))).toBe(false);
    expect(accessTokenMatches(secret, 'sb-1', seed, '')).toBe(false);
    expect(accessTokenMatches(secret, 'sb-1', null, '')).toBe(false);
    expect(accessTokenMatches(secret, 'sb-1', undefined, t)).toBe(false);
  });
});
