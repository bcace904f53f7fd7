/**
 * The fork copy of mock and proot (host-fs/copy.ts): links copied as links (never followed, even
 * when they point outside), special files skipped, modes kept, and bounded by bytes and entries.
 */
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
  existsSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { copyTreeByHandle } from '../../src/adapters/providers/shared/host-fs/copy.js';

let dir: string;
let src: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sbx-fork-copy-'));
  src = join(dir, 'src');
  mkdirSync(join(src, 'a', 'b'), { recursive: true });
  writeFileSync(join(src, 'a', 'b', 'file.txt'), 'hello');
  writeFileSync(join(src, 'tool.sh'), '#!/bin/sh\n');
  chmodSync(join(src, 'tool.sh'), 0o750);
  writeFileSync(join(dir, 'outside-secret'), 'host only');
  symlinkSync(join(dir, 'outside-secret'), join(src, 'escape'));
  symlinkSync(dir, join(src, 'escape-dir'));
  symlinkSync('a/b/file.txt', join(src, 'rel'));
  execFileSync('mkfifo', [join(src, 'pipe')]);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('copyTreeByHandle', () => {
  it('copies files, dirs and modes; links stay links with their text; a FIFO is skipped', async () => {
    const dest = join(dir, 'dest1');
    const r = await copyTreeByHandle(src, dest, { maxBytes: 1 << 20, maxEntries: 100 });
    expect(readFileSync(join(dest, 'a', 'b', 'file.txt'), 'utf8')).toBe('hello');
    expect(statSync(join(dest, 'tool.sh')).mode & 0o777).toBe(0o750);
    for (const l of ['escape', 'escape-dir', 'rel']) expect(lstatSync(join(dest, l)).isSymbolicLink()).toBe(true);
    expect(readlinkSync(join(dest, 'escape'))).toBe(join(dir, 'outside-secret'));
    expect(readlinkSync(join(dest, 'rel'))).toBe('a/b/file.txt');
    // Never followed: nothing of the host directory the link names was copied.
    expect(readdirSync(dest).sort()).toEqual(['a', 'escape', 'escape-dir', 'rel', 'tool.sh']);
    expect(lstatSync(join(dest, 'escape-dir')).isDirectory()).toBe(false);
    expect(existsSync(join(dest, 'pipe'))).toBe(false);
    expect(r.skipped).toBe(1);
    expect(r.bytes).toBe(5 + 10);
  });

  it('refuses a tree over the byte or entry bound with 413', async () => {
    await expect(copyTreeByHandle(src, join(dir, 'dest2'), { maxBytes: 8, maxEntries: 100 })).rejects.toMatchObject({
      code: 'payload_too_large',
    });
    await expect(copyTreeByHandle(src, join(dir, 'dest3'), { maxBytes: 1 << 20, maxEntries: 3 })).rejects.toMatchObject({
      code: 'payload_too_large',
    });
  });

  it('a root that is a link is refused, not followed', async () => {
    const link = join(dir, 'root-link');
    symlinkSync(src, link);
    await expect(copyTreeByHandle(link, join(dir, 'dest4'), { maxBytes: 1 << 20, maxEntries: 100 })).rejects.toThrow();
    expect(existsSync(join(dir, 'dest4', 'tool.sh'))).toBe(false);
  });
});
