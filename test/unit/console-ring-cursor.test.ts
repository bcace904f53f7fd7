/** Console ring line numbers: every line recorded counts, also those the ring skips or pushes out. */
import { describe, expect, it } from 'vitest';
import { ConsoleRing } from '../../src/adapters/providers/shared/console-ring.js';

describe('ConsoleRing cursors', () => {
  it('numbers lines from 1; a tail read reports the newest number', () => {
    const ring = new ConsoleRing(10);
    expect(ring.read({ lines: 5 })).toEqual({ lines: [], cursor: 0 });
    ring.append('ok\nok\n\nok\n');
    expect(ring.read({ lines: 2 })).toEqual({ lines: ['', 'ok'], cursor: 4 });
    expect(ring.cursor).toBe(4);
  });

  it('a partial line gets its number only once it is complete', () => {
    const ring = new ConsoleRing(10);
    ring.append('a\npart', 'x:stdout');
    expect(ring.read({ lines: 10, after: 0 })).toEqual({ lines: ['a'], cursor: 1 });
    ring.append('ial\n', 'x:stdout');
    expect(ring.read({ lines: 10, after: 1 })).toEqual({ lines: ['partial'], cursor: 2 });
  });

  it('counts lines skipped in a big batch and lines pushed out, so numbers match what was written', () => {
    const ring = new ConsoleRing(3);
    // One batch of 8 lines: only the last 3 are ever split into the ring.
    ring.append('1\n2\n3\n');
    ring.append('4\n5\n');
    ring.append('6\n7\n8\n');
    expect(ring.read({ lines: 10 })).toEqual({ lines: ['6', '7', '8'], cursor: 8 });
    // A reader that last saw line 2 gets what is still kept, and the right cursor.
    expect(ring.read({ lines: 10, after: 2 })).toEqual({ lines: ['6', '7', '8'], cursor: 8 });
    expect(ring.read({ lines: 1, after: 6 })).toEqual({ lines: ['7'], cursor: 7 });
    ring.append('9\n');
    ring.append('x\n', 'other');
    expect(ring.read({ lines: 10, after: 8 })).toEqual({ lines: ['9', 'x'], cursor: 10 });
  });

  it('an over-long line counts once per piece it is broken into', () => {
    const ring = new ConsoleRing(10);
    ring.append(`${'a'.repeat(40_000)}\nb\n`);
    const all = ring.read({ lines: 10, after: 0 });
    expect(all.lines.map((l) => l.length)).toEqual([16_384, 16_384, 40_000 - 32_768, 1]);
    expect(all.cursor).toBe(4);
  });

  it('a cursor beyond the newest line starts over; lines 0 reads nothing but keeps the cursor', () => {
    const ring = new ConsoleRing(10);
    ring.append('a\nb\n');
    expect(ring.read({ lines: 10, after: 50 })).toEqual({ lines: ['a', 'b'], cursor: 2 });
    expect(ring.read({ lines: 0, after: 1 })).toEqual({ lines: [], cursor: 1 });
    expect(ring.read({ lines: 0 })).toEqual({ lines: [], cursor: 2 });
  });
});
