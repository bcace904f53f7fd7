import { spawn } from 'node:child_process';
import { existsSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { sweepProotLoaders } from '../../src/adapters/providers/proot/loaders.js';

const prootEnabled = process.env.SBX_TEST_PROOT === '1';
const loaders = () => new Set(readdirSync('/tmp').filter((n) => /^prooted-\d+-/.test(n)));

describe('proot loader sweep', () => {
  it('removes old loaders nobody maps, keeps young ones and other names', async () => {
    const old = `/tmp/prooted-4000000-sbxOld${process.pid}`;
    const young = `/tmp/prooted-4000001-sbxNew${process.pid}`;
    const other = `/tmp/prootedish-${process.pid}`;
    for (const f of [old, young, other]) writeFileSync(f, 'x');
    const past = (Date.now() - 120_000) / 1000;
    utimesSync(old, past, past);
    try {
      await sweepProotLoaders(60_000);
      expect(existsSync(old)).toBe(false);
      expect(existsSync(young)).toBe(true);
      expect(existsSync(other)).toBe(true);
    } finally {
      for (const f of [old, young, other]) if (existsSync(f)) (await import('node:fs')).unlinkSync(f);
    }
  });

  it.skipIf(!prootEnabled)('never removes the loader of a running proot', async () => {
    const before = loaders();
    const child = spawn('proot', ['-r', '/', '/bin/sleep', '5'], { stdio: 'ignore' });
    try {
      let mine: string | undefined;
      for (const end = Date.now() + 10_000; !mine && Date.now() < end; await new Promise((r) => setTimeout(r, 50))) {
        mine = [...loaders()].find((n) => !before.has(n));
      }
      expect(mine).toBeDefined();
      await new Promise((r) => setTimeout(r, 300)); // the tracee maps it
      await sweepProotLoaders(0);
      expect(existsSync(`/tmp/${mine}`)).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  });
});
