import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { sbxAt } from './run-sbx.js';
import { tempDir } from '../helpers/tmp.js';

let server: TestServer;
let sbx: ReturnType<typeof sbxAt>;
let id: string;
let work: string;

beforeAll(async () => {
  server = await startTestServer();
  sbx = sbxAt(server.url);
  id = (await sbx(['spawn'])).stdout.trim();
  work = tempDir('sbx-cli-files-');
});
afterAll(async () => {
  await server?.close();
});

const binary = Buffer.from(Array.from({ length: 256 }, (_, i) => i));

describe('sbx files', () => {
  it('put then get round-trips binary content exactly', async () => {
    writeFileSync(join(work, 'blob.bin'), binary);
    const put = await sbx(['files', 'put', 'blob.bin', `${id}:/tmp/blob.bin`], { cwd: work });
    expect(put.code).toBe(0);
    expect(put.stdout).toBe('');
    expect(put.stderr).toContain(`${id}:/tmp/blob.bin`);
    const get = await sbx(['files', 'get', `${id}:/tmp/blob.bin`, 'copy.bin'], { cwd: work });
    expect(get.code).toBe(0);
    expect(readFileSync(join(work, 'copy.bin')).equals(binary)).toBe(true);
    const cat = await sbx(['files', 'cat', `${id}:/tmp/blob.bin`]);
    expect(cat.code).toBe(0);
    expect(cat.stdoutBytes.equals(binary)).toBe(true);
    const toStdout = await sbx(['files', 'get', `${id}:/tmp/blob.bin`, '-']);
    expect(toStdout.stdoutBytes.equals(binary)).toBe(true);
  });

  it('put - reads stdin; a trailing / keeps the local name; --mode applies', async () => {
    const r = await sbx(['files', 'put', '-', `${id}:/tmp/from-stdin.txt`], { stdin: 'piped text\n' });
    expect(r.code).toBe(0);
    expect((await sbx(['files', 'cat', `${id}:/tmp/from-stdin.txt`])).stdout).toBe('piped text\n');
    // An empty pipe writes an empty file; a terminal on stdin is a usage error, not an empty write.
    expect((await sbx(['files', 'put', '-', `${id}:/tmp/empty.txt`], { stdin: '' })).code).toBe(0);
    expect(JSON.parse((await sbx(['files', 'stat', `${id}:/tmp/empty.txt`, '--json'])).stdout).size).toBe(0);
    const tty = await sbx(['files', 'put', '-', `${id}:/tmp/tty.txt`], { stdinTTY: true });
    expect(tty.code).toBe(2);
    expect(tty.stderr).toMatch(/^sbx: with - the content comes from stdin, which is a terminal/);
    expect((await sbx(['files', 'stat', `${id}:/tmp/tty.txt`])).code).toBe(4);
    writeFileSync(join(work, 'run.sh'), '#!/bin/sh\necho ran\n');
    const dir = await sbx(['files', 'put', '--mode', '755', 'run.sh', `${id}:/tmp/`], { cwd: work });
    expect(dir.code).toBe(0);
    const st = JSON.parse((await sbx(['files', 'stat', `${id}:/tmp/run.sh`, '--json'])).stdout);
    expect(st).toMatchObject({ name: 'run.sh', path: '/tmp/run.sh', is_dir: false, mode: '0755', size: 19 });
  });

  it('put of a missing local file exits 1 before any request', async () => {
    // An unreachable URL would exit 6 if a request were made.
    const r = await sbxAt('http://127.0.0.1:9')(['files', 'put', 'nope.txt', `${id}:/tmp/x`], { cwd: work });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('sbx: nope.txt: no such local file\n');
  });

  it('ls, stat, mv, chmod, glob, rm', async () => {
    await sbx(['files', 'put', '-', `${id}:/tmp/d/a.txt`], { stdin: 'a' });
    await sbx(['files', 'put', '-', `${id}:/tmp/d/b.py`], { stdin: 'bb' });
    const ls = await sbx(['files', 'ls', `${id}:/tmp/d`]);
    expect(ls.code).toBe(0);
    expect(ls.stdout.split('\n')[0]).toMatch(/^MODE\s+SIZE\s+MODIFIED\s+NAME$/);
    expect(ls.stdout).toMatch(/a\.txt/);
    const lsJson = JSON.parse((await sbx(['files', 'ls', `${id}:/tmp/d`, '--json'])).stdout);
    expect(lsJson.map((f: { name: string }) => f.name)).toEqual(['a.txt', 'b.py']);

    const glob = await sbx(['files', 'glob', `${id}:/tmp/d/*.py`]);
    expect(glob.stdout).toBe('/tmp/d/b.py\n');
    const glob2 = await sbx(['files', 'glob', id, '/tmp/d/*']);
    expect(glob2.stdout).toBe('/tmp/d/a.txt\n/tmp/d/b.py\n');

    expect((await sbx(['files', 'mv', `${id}:/tmp/d/a.txt`, '/tmp/d/c.txt'])).code).toBe(0);
    expect((await sbx(['files', 'cat', `${id}:/tmp/d/c.txt`])).stdout).toBe('a');
    expect((await sbx(['files', 'cat', `${id}:/tmp/d/a.txt`])).code).toBe(4);

    expect((await sbx(['files', 'chmod', '600', `${id}:/tmp/d/c.txt`])).code).toBe(0);
    expect(JSON.parse((await sbx(['files', 'stat', `${id}:/tmp/d/c.txt`, '--json'])).stdout).mode).toBe('0600');

    const stat = await sbx(['files', 'stat', `${id}:/tmp/d`]);
    expect(stat.stdout).toMatch(/type:\s+directory/);

    expect((await sbx(['files', 'rm', `${id}:/tmp/d`])).code).not.toBe(0);
    expect((await sbx(['files', 'rm', '-r', `${id}:/tmp/d`])).code).toBe(0);
    expect((await sbx(['files', 'stat', `${id}:/tmp/d`])).code).toBe(4);
  });

  it('-r uploads and downloads directory trees', async () => {
    const src = join(work, 'tree');
    mkdirSync(join(src, 'sub'), { recursive: true });
    writeFileSync(join(src, 'top.txt'), 'top');
    writeFileSync(join(src, 'sub', 'deep.bin'), binary);
    const noR = await sbx(['files', 'put', 'tree', `${id}:/tmp/tree`], { cwd: work });
    expect(noR.code).toBe(1);
    expect(noR.stderr).toContain('-r');
    expect((await sbx(['files', 'put', '-r', 'tree', `${id}:/tmp/tree`], { cwd: work })).code).toBe(0);
    expect((await sbx(['files', 'cat', `${id}:/tmp/tree/top.txt`])).stdout).toBe('top');
    const out = join(work, 'back');
    const get = await sbx(['files', 'get', '-r', `${id}:/tmp/tree`, out], { cwd: work });
    expect(get.code).toBe(0);
    expect(readFileSync(join(out, 'top.txt'), 'utf8')).toBe('top');
    expect(readFileSync(join(out, 'sub', 'deep.bin')).equals(binary)).toBe(true);
    expect(existsSync(join(out, 'tree'))).toBe(false);
  });

  it('a file op on an unknown sandbox exits 4', async () => {
    const r = await sbx(['files', 'ls', 'sb-unknown:/']);
    expect(r.code).toBe(4);
  });
});
