import { describe, expect, it } from 'vitest';
import { validateOwnerId } from '../../src/core/admission/owner.js';
import { SbxError } from '../../src/core/errors.js';

function refusal(input: string): SbxError {
  try {
    validateOwnerId(input, 'X-User-ID');
  } catch (err) {
    return err as SbxError;
  }
  throw new Error(`accepted ${JSON.stringify(input)}`);
}

describe('owner id rule (spec 2.6, 5.1 rule 1, 8)', () => {
  it('refuses C0 and C1 controls, Unicode whitespace, line separators, invisible characters and path separators', () => {
    const cases: Array<[string, string]> = [
      ['a\u0000b', 'U+0000'],
      ['a\u001fb', 'U+001F'],
      ['a\u007fb', 'U+007F'],
      ['a\u0080b', 'U+0080'],
      ['a\u0085b', 'U+0085'],
      ['a\u009fb', 'U+009F'],
      ['a b', 'U+0020'],
      ['a\tb', 'U+0009'],
      ['a\u00a0b', 'U+00A0'],
      ['a\u1680b', 'U+1680'],
      ['a\u2003b', 'U+2003'],
      ['a\u2028b', 'U+2028'],
      ['a\u2029b', 'U+2029'],
      ['a\u202fb', 'U+202F'],
      ['a\u3000b', 'U+3000'],
      ['a\u200bb', 'U+200B'],
      ['a\u202eb', 'U+202E'],
      ['a\ufeffb', 'U+FEFF'],
      ['a\ud800b', 'U+D800'],
      ['a/b', 'U+002F'],
      ['a\\b', 'U+005C'],
    ];
    for (const [input, cp] of cases) {
      const err = refusal(input);
      expect(err, JSON.stringify(input)).toBeInstanceOf(SbxError);
      expect(err.code).toBe('bad_request');
      expect(err.message).toBe(`X-User-ID must not contain whitespace, control or invisible characters or path separators (found ${cp})`);
    }
  });

  it('trims, keeps ordinary Unicode, and bounds the length', () => {
    expect(validateOwnerId('  alice\u00a0', 'X-User-ID')).toBe('alice');
    expect(validateOwnerId('team.a_b-c@d:e', 'X-User-ID')).toBe('team.a_b-c@d:e');
    expect(validateOwnerId('zoë-😀', 'X-User-ID')).toBe('zoë-😀');
    expect(validateOwnerId('o'.repeat(128), 'X-User-ID')).toBe('o'.repeat(128));
    expect(refusal('o'.repeat(129)).message).toBe('X-User-ID must be at most 128 characters');
    expect(validateOwnerId('   ', 'X-User-ID')).toBeNull();
    expect(validateOwnerId(undefined, 'X-User-ID')).toBeNull();
  });
});
