import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import type { ExecEvent } from '../../src/core/ports/index.js';
import { ConsoleRing } from '../../src/adapters/providers/shared/console-ring.js';
import { execProcess } from '../../src/adapters/providers/shared/exec-process.js';
import { formatMode, parseMode } from '../../src/adapters/providers/shared/file-mode.js';
import { globMatch, globToRegExp, planGlob } from '../../src/adapters/providers/shared/glob.js';
import { HostFs } from '../../src/adapters/providers/shared/host-fs.js';
import { buildShellCommand, shellQuote } from '../../src/shared/shell.js';

const never = new AbortController().signal;

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SbxError);
    return (err as SbxError).code;
  }
  throw new Error('expected an SbxError');
}

describe('file modes', () => {
  it('formats permission and special bits with a leading zero', () => {
    expect(formatMode(0o644)).toBe('0644');
    expect(formatMode(0o755)).toBe('0755');
    expect(formatMode(0o1777)).toBe('01777');
    expect(formatMode(0o7)).toBe('0007');
    expect(formatMode(0o100644)).toBe('0644'); // file type bits from st_mode are dropped
  });

  it('parses octal strings and rejects the rest', async () => {
    expect(parseMode('755')).toBe(0o755);
    expect(parseMode('0755')).toBe(0o755);
    expect(parseMode('01777')).toBe(0o1777);
    for (const bad of ['999', 'rwx', '', '0x1ff', '12345']) {
      expect(() => parseMode(bad), bad).toThrow(SbxError);
      expect(await codeOf(Promise.resolve().then(() => parseMode(bad)))).toBe('bad_request');
    }
  });
});

describe('shell quoting', () => {
  it('quotes every word so the shell does not expand it', () => {
    expect(shellQuote('')).toBe("''");
    expect(shellQuote("it's")).toBe("'it'\\''s'");
    expect(buildShellCommand('printf "%s|"', ['a b', '$HOME'])).toBe(`printf "%s|" 'a b' '$HOME'`);
    const out = execFileSync('/bin/sh', ['-c', buildShellCommand('printf "%s|"', ["it's", '$(id)', '`x`', '\\', '\n'])]);
    expect(out.toString()).toBe("it's|$(id)|`x`|\\|\n|");
  });
});

describe('glob', () => {
  it('* and ? stay within a segment, ** crosses them', () => {
    expect(globMatch('/w/*.txt', '/w/a.txt')).toBe(true);
    expect(globMatch('/w/*.txt', '/w/d/a.txt')).toBe(false);
    expect(globMatch('/w/?.txt', '/w/ab.txt')).toBe(false);
    expect(globMatch('/w/**/*.txt', '/w/a.txt')).toBe(true);
    expect(globMatch('/w/**/*.txt', '/w/x/y/a.txt')).toBe(true);
    expect(globMatch('/w/**', '/w')).toBe(true);
    expect(globMatch('/w/**', '/w/x/y')).toBe(true);
    expect(globMatch('/w/*', '/w/.hidden')).toBe(true);
  });

  it('supports classes, negation, ranges and escapes', () => {
    expect(globMatch('/w/[ab].c', '/w/b.c')).toBe(true);
    expect(globMatch('/w/[!ab].c', '/w/b.c')).toBe(false);
    expect(globMatch('/w/[!ab].c', '/w/z.c')).toBe(true);
    expect(globMatch('/w/[a-c]x', '/w/bx')).toBe(true);
    expect(globMatch('/w/[a-c]x', '/w/dx')).toBe(false);
    expect(globMatch('/w/[]]', '/w/]')).toBe(true);
    expect(globMatch('/w/\\*', '/w/*')).toBe(true);
    expect(globMatch('/w/\\*', '/w/a')).toBe(false);
    expect(globMatch('/w/[', '/w/[')).toBe(true);
    expect(globMatch('/w/a.b', '/w/aXb')).toBe(false);
    expect(() => globToRegExp('/w/(x|y)+$^')).not.toThrow();
  });

  it('plans a walk: literal base and depth bound', () => {
    expect(planGlob('/workspace/g/*.txt')).toMatchObject({ base: '/workspace/g', depth: 1 });
    expect(planGlob('/workspace/*/x/*.txt')).toMatchObject({ base: '/workspace', depth: 3 });
    expect(planGlob('/workspace/**/x')).toMatchObject({ base: '/workspace', depth: Infinity });
    expect(planGlob('/etc/passwd')).toMatchObject({ base: '/etc/passwd', depth: 0 });
  });
});

describe('console ring', () => {
  it('splits lines, keeps partial lines per source, and is bounded', () => {
    const ring = new ConsoleRing(3);
    ring.append('a\nb', 'out');
    ring.append(Buffer.from('err\n'), 'err');
    expect(ring.tail(10)).toEqual(['a', 'err']);
    ring.append('c\r\n', 'out');
    expect(ring.tail(10)).toEqual(['a', 'err', 'bc']);
    ring.append('d\ne\npartial', 'out');
    expect(ring.tail(10)).toEqual(['bc', 'd', 'e']);
    ring.flush();
    expect(ring.tail(2)).toEqual(['e', 'partial']);
    expect(ring.tail(0)).toEqual([]);
    expect(ring.size).toBe(3);
  });

  it('decodes UTF-8 split across chunks and breaks endless lines', () => {
    const ring = new ConsoleRing();
    const bytes = Buffer.from('héllo\n');
    ring.append(bytes.subarray(0, 2));
    ring.append(bytes.subarray(2));
    expect(ring.tail(1)).toEqual(['héllo']);
    ring.append('x'.repeat(40_000));
    ring.flush();
    expect(ring.tail(3).map((l) => l.length)).toEqual([16_384, 16_384, 40_000 - 32_768]);
  });
});

describe('execProcess', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sbx-exec-unit-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const shSpec = (script: string) => ({
    file: '/bin/sh',
    args: ['-c', script],
    cwd: dir,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });

  async function drain(iter: AsyncIterable<ExecEvent>) {
    let bytes = 0;
    let exit: number | null = null;
    for await (const ev of iter) {
      if (ev.stream === 'exit') exit = ev.exit_code;
      else bytes += ev.data.byteLength;
    }
    return { bytes, exit };
  }

  it('reports a signal death as 128 + signo and a missing program as 127', async () => {
    expect((await drain(execProcess(shSpec('kill -TERM $$'), never))).exit).toBe(143);
    const nf = await drain(execProcess({ file: 'sbx-no-such-program', args: [], cwd: dir, env: { PATH: '/usr/bin:/bin' } }, never));
    expect(nf.exit).toBe(127);
  });

  it('pauses a fast producer while the consumer is slow, and loses nothing', async () => {
    const marker = join(dir, 'produced-all');
    const iter = execProcess(shSpec(`head -c 20000000 /dev/zero; touch '${marker}'`), never)[Symbol.asyncIterator]();
    const first = await iter.next();
    expect(first.done).toBe(false);
    await new Promise((r) => setTimeout(r, 500));
    // Not consuming: the producer must be blocked well before writing 20 MB.
    expect(existsSync(marker)).toBe(false);
    let bytes = first.value && first.value.stream !== 'exit' ? first.value.data.byteLength : 0;
    const rest = await drain({ [Symbol.asyncIterator]: () => iter });
    bytes += rest.bytes;
    expect(bytes).toBe(20_000_000);
    expect(rest.exit).toBe(0);
    expect(existsSync(marker)).toBe(true);
  });

  it('does not wait for a background process that keeps the pipes open', async () => {
    const started = Date.now();
    const res = await drain(execProcess(shSpec('sleep 3 & echo main'), never));
    expect(res.exit).toBe(0);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('rejects env names the OS cannot carry', async () => {
    const spec = { ...shSpec('true'), env: { 'A=B': 'x' } };
    expect(await codeOf(drain(execProcess(spec, never)))).toBe('bad_request');
  });
});

describe('HostFs', () => {
  let root: string;
  let fs: HostFs;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'sbx-hostfs-unit-'));
    mkdirSync(join(root, 'sb', 'workspace'), { recursive: true });
    fs = new HostFs(join(root, 'sb'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('rejects unnormalized paths and writes to the root', async () => {
    expect(await codeOf(fs.readFile('/workspace/../../x'))).toBe('bad_request');
    expect(await codeOf(fs.writeFile('/', Buffer.from('x'), undefined))).toBe('bad_request');
    expect(await codeOf(fs.deleteFile('/', true))).toBe('bad_request');
  });

  it('keeps the mode of an overwritten file and creates parents on move', async () => {
    await fs.writeFile('/workspace/m.sh', Buffer.from('1'), 0o700);
    await fs.writeFile('/workspace/m.sh', Buffer.from('2'), undefined);
    expect((await fs.stat('/workspace/m.sh')).mode).toBe('0700');
    await fs.moveFile('/workspace/m.sh', '/workspace/new/dir/m.sh');
    expect(Buffer.from(await fs.readFile('/workspace/new/dir/m.sh')).toString()).toBe('2');
  });

  it('treats a dangling link as missing for reads and refuses writes through it', async () => {
    symlinkSync('/nonexistent-target-for-sbx', join(root, 'sb', 'workspace', 'dangle'));
    expect(await codeOf(fs.readFile('/workspace/dangle'))).toBe('not_found');
    expect(await codeOf(fs.writeFile('/workspace/dangle', Buffer.from('x'), undefined))).toBe('bad_request');
    expect(existsSync('/nonexistent-target-for-sbx')).toBe(false);
  });

  it('follows links that stay inside, and lists without leaking outside targets', async () => {
    writeFileSync(join(root, 'outside.txt'), 'outside!');
    symlinkSync('../../outside.txt', join(root, 'sb', 'workspace', 'rel-out'));
    await fs.writeFile('/workspace/real.txt', Buffer.from('real'), undefined);
    symlinkSync('real.txt', join(root, 'sb', 'workspace', 'rel-in'));
    expect(Buffer.from(await fs.readFile('/workspace/rel-in')).toString()).toBe('real');
    expect(await codeOf(fs.readFile('/workspace/rel-out'))).toBe('bad_request');
    const items = await fs.listFiles('/workspace');
    expect(items.find((i) => i.name === 'rel-in')?.size).toBe(4);
    expect(items.find((i) => i.name === 'rel-out')?.size).not.toBe('outside!'.length);
    expect(await codeOf(fs.listFiles('/workspace/real.txt'))).toBe('bad_request');
  });

  it('answers not_found once the root is gone', async () => {
    const gone = new HostFs(join(root, 'never-created'));
    expect(await codeOf(gone.stat('/'))).toBe('not_found');
    expect(await codeOf(gone.writeFile('/workspace/x', Buffer.from('x'), undefined))).toBe('not_found');
    expect(existsSync(join(root, 'never-created'))).toBe(false);
  });
});
