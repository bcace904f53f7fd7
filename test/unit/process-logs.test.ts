/** The output log of background processes: offsets, the kept window, reopening after a crash. */
import { appendFileSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createProcessLogs } from '../../src/adapters/system/process-logs.js';

const dirs: string[] = [];
const root = () => {
  const d = mkdtempSync(join(tmpdir(), 'sbx-plog-'));
  dirs.push(d);
  return d;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const text = (chunks: { data: Uint8Array }[]) => Buffer.concat(chunks.map((c) => c.data)).toString();

describe('process output logs', () => {
  it('numbers bytes of both streams in arrival order and reads from any offset, also mid-chunk', async () => {
    const logs = createProcessLogs(root());
    const log = (await logs.open('p-a', true))!;
    await log.append('stdout', Buffer.from('hello '));
    await log.append('stderr', Buffer.from('oops\n'));
    await log.append('stdout', Buffer.from('world\n'));
    expect([log.start, log.end, log.counts]).toEqual([0, 17, { stdout: 12, stderr: 5 }]);
    const all = await log.read(0, 1000);
    expect(all.map((c) => [c.stream, c.offset, Buffer.from(c.data).toString()])).toEqual([
      ['stdout', 0, 'hello '],
      ['stderr', 6, 'oops\n'],
      ['stdout', 11, 'world\n'],
    ]);
    const mid = await log.read(8, 5);
    expect(mid.map((c) => [c.stream, c.offset, Buffer.from(c.data).toString()])).toEqual([
      ['stderr', 8, 'ps\n'],
      ['stdout', 11, 'wo'],
    ]);
    expect(await log.read(17, 10)).toEqual([]);
    expect(await log.read(99, 10)).toEqual([]);
    await log.close();
    expect(await logs.open('p-missing', false)).toBeNull();
  });

  it('keeps only the newest bytes, dropping whole segments, and counts what it dropped', async () => {
    const dir = root();
    const logs = createProcessLogs(dir, { limit: 1000, segmentBytes: 100 });
    const log = (await logs.open('p-b', true))!;
    for (let i = 0; i < 100; i++) await log.append(i % 2 ? 'stderr' : 'stdout', Buffer.from(`${String(i).padStart(9, '0')}\n`));
    expect(log.end).toBe(1000);
    expect(log.start).toBeGreaterThan(0);
    expect(log.end - log.start).toBeLessThanOrEqual(1000);
    expect(log.end - log.start).toBeGreaterThan(800);
    const kept = await log.read(0, 10_000);
    expect(kept[0]!.offset).toBe(log.start);
    expect(text(kept)).toBe(
      Array.from({ length: 100 }, (_, i) => `${String(i).padStart(9, '0')}\n`)
        .join('')
        .slice(log.start),
    );
    expect(readdirSync(join(dir, 'p-b')).filter((n) => n.endsWith('.seg')).length).toBeLessThanOrEqual(15);
    await log.close();
    // Reopened: the same window and the same per-stream counts (dropped bytes included).
    const again = (await logs.open('p-b', false))!;
    expect([again.start, again.end, again.counts]).toEqual([log.start, 1000, { stdout: 500, stderr: 500 }]);
    await again.close();
    await logs.remove('p-b');
    expect(await logs.open('p-b', false)).toBeNull();
  });

  it('cuts off a frame left half-written by a crash when reopened', async () => {
    const dir = root();
    const logs = createProcessLogs(dir);
    const log = (await logs.open('p-c', true))!;
    await log.append('stdout', Buffer.from('complete\n'));
    await log.close();
    // A header promising 100 bytes, and only 3 of them.
    const header = Buffer.alloc(5);
    header[0] = 1;
    header.writeUInt32BE(100, 1);
    appendFileSync(join(dir, 'p-c', '0.seg'), Buffer.concat([header, Buffer.from('abc')]));
    const again = (await logs.open('p-c', true))!;
    expect([again.end, again.counts.stdout]).toEqual([9, 9]);
    await again.append('stderr', Buffer.from('next'));
    expect(text(await again.read(0, 100))).toBe('complete\nnext');
    await again.close();
  });

  it('refuses names that are not process ids', async () => {
    const logs = createProcessLogs(root());
    await expect(logs.open('../etc', true)).rejects.toThrow(/process id/);
  });
});
