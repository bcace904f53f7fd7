import { describe, expect, it } from 'vitest';
import { OutputCapture } from '../../src/transports/mcp/capture.js';

describe('OutputCapture (sbx mcp exec output)', () => {
  it('keeps everything under the limit', () => {
    const c = new OutputCapture(16);
    c.push(Buffer.from('hello '));
    c.push(Buffer.from('world'));
    expect(c.total).toBe(11);
    expect(c.dropped).toBe(0);
    expect(c.text('stdout')).toBe('hello world');
    expect(c.note('stdout')).toBeUndefined();
  });

  it('keeps the first quarter and the last three quarters, and counts the middle', () => {
    const c = new OutputCapture(16);
    // 4 head bytes, 12 tail bytes; fed in uneven chunks.
    const all = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
    for (const piece of ['AB', 'CDEFG', 'HIJKLMNOPQRSTUV', 'W', 'XYZ0123456789']) c.push(Buffer.from(piece));
    expect(c.total).toBe(all.length);
    expect(c.dropped).toBe(all.length - 16);
    expect(c.text('stdout')).toBe(`ABCD\n[sbx: ${all.length - 16} bytes of stdout dropped here]\n${all.slice(-12)}`);
    expect(c.note('stdout')).toContain(
      `stdout was ${all.length} bytes: the first 4 and the last 12 are shown, ${all.length - 16} bytes in the middle were dropped`,
    );
  });

  it('handles one chunk far bigger than the limit', () => {
    const c = new OutputCapture(64 * 1024);
    c.push(Buffer.alloc(1_000_000, 'x'));
    c.push(Buffer.from('END'));
    expect(c.dropped).toBe(1_000_003 - 64 * 1024);
    expect(c.text('stderr').endsWith('xEND')).toBe(true);
  });
});
