import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { globMatch } from '../../src/adapters/providers/shared/glob.js';
import { HostFs } from '../../src/adapters/providers/shared/host-fs.js';
import { SbxError } from '../../src/core/errors.js';
import { MAX_PATH_DEPTH, sandboxGlob, sandboxPath } from '../../src/core/sandboxes/paths.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/* Issue 12, point 6: malformed paths are 400 bad_request everywhere, never 500. */

async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SbxError);
    return (err as SbxError).code;
  }
  throw new Error('expected an SbxError');
}

const codeOfSync = (f: () => unknown): string => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(SbxError);
    return (err as SbxError).code;
  }
  return 'ok';
};

const long = 'x'.repeat(256);
const deep = (levels: number) => '/' + Array.from({ length: levels }, () => 'a').join('/');

describe('sandbox path validation (core)', () => {
  it('takes names up to 255 bytes and refuses longer ones, counting bytes', () => {
    expect(sandboxPath(`/w/${'x'.repeat(255)}`)).toBe(`/w/${'x'.repeat(255)}`);
    expect(sandboxPath(`/w/${'é'.repeat(127)}x`)).toBe(`/w/${'é'.repeat(127)}x`);
    expect(codeOfSync(() => sandboxPath(`/w/${long}`))).toBe('bad_request');
    expect(codeOfSync(() => sandboxPath(`/w/${'é'.repeat(128)}`))).toBe('bad_request'); // 128 characters, 256 bytes
    expect(() => sandboxPath(`/w/${long}/f`, 'old_path')).toThrow('old_path has a component longer than 255 bytes');
  });

  it('refuses paths deeper than the bound and longer than PATH_MAX', () => {
    expect(sandboxPath(deep(MAX_PATH_DEPTH))).toBe(deep(MAX_PATH_DEPTH));
    expect(() => sandboxPath(deep(MAX_PATH_DEPTH + 1))).toThrow(`path is deeper than ${MAX_PATH_DEPTH} levels`);
    // `..` folds before the depth counts: what is left is what matters.
    expect(sandboxPath(deep(MAX_PATH_DEPTH) + '/b/..')).toBe(deep(MAX_PATH_DEPTH));
    const twoByte = '/' + Array.from({ length: 17 }, () => 'é'.repeat(120)).join('/'); // 2,057 characters, 4,097 bytes
    expect(twoByte.length).toBeLessThan(4096);
    expect(() => sandboxPath(twoByte)).toThrow('path is longer than 4095 bytes');
    expect(codeOfSync(() => sandboxPath('/' + 'a/'.repeat(2100)))).toBe('bad_request');
  });

  it('checks glob patterns the same way where a segment is a plain name', () => {
    expect(sandboxGlob('/workspace/*')).toBe('/workspace/*');
    expect(codeOfSync(() => sandboxGlob(`/workspace/${long}/*`))).toBe('bad_request');
    expect(codeOfSync(() => sandboxGlob(deep(MAX_PATH_DEPTH + 1) + '/*'))).toBe('bad_request');
    // With glob syntax a segment may be longer than the names it matches.
    expect(sandboxGlob(`/workspace/${'[ab]'.repeat(70)}`)).toBe(`/workspace/${'[ab]'.repeat(70)}`);
  });
});

describe('glob at the top level (issue 12.7)', () => {
  it('a `*` segment matches a name, never nothing: /* is not /', async () => {
    expect(globMatch('/*', '/')).toBe(false);
    expect(globMatch('/*', '/tmp')).toBe(true);
    expect(globMatch('/w/*', '/w/')).toBe(false);
    expect(globMatch('/w/*', '/w')).toBe(false);
    expect(globMatch('/w/*x', '/w/x')).toBe(true);
    const root = mkdtempSync(join(tmpdir(), 'sbx-hostfs-glob-'));
    try {
      mkdirSync(join(root, 'workspace', 'inner'), { recursive: true });
      writeFileSync(join(root, 'top.txt'), 'x');
      expect(await new HostFs(root).glob('/*')).toEqual(['/top.txt', '/workspace']);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('HostFs path edge cases', () => {
  let root: string;
  let fs: HostFs;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'sbx-hostfs-paths-'));
    mkdirSync(join(root, 'sb', 'workspace'), { recursive: true });
    fs = new HostFs(join(root, 'sb'));
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const ws = () => join(root, 'sb', 'workspace');

  it('refuses long names and NUL bytes with bad_request, not a provider error', async () => {
    for (const p of [`/workspace/${long}`, `/workspace/${long}/x`, '/workspace/a\0b']) {
      expect(await codeOf(fs.writeFile(p, Buffer.from('x'), undefined)), p).toBe('bad_request');
      expect(await codeOf(fs.readFile(p)), p).toBe('bad_request');
      expect(await codeOf(fs.stat(p)), p).toBe('bad_request');
      expect(await codeOf(fs.deleteFile(p, true)), p).toBe('bad_request');
    }
  });

  it('refuses link loops and links through files', async () => {
    symlinkSync('loop-b', join(ws(), 'loop-a'));
    symlinkSync('loop-a', join(ws(), 'loop-b'));
    expect(await codeOf(fs.readFile('/workspace/loop-a'))).toBe('bad_request');
    expect(await codeOf(fs.writeFile('/workspace/loop-a/x', Buffer.from('x'), undefined))).toBe('bad_request');
    writeFileSync(join(ws(), 'plain'), 'plain');
    expect(await codeOf(fs.writeFile('/workspace/plain/x', Buffer.from('x'), undefined))).toBe('bad_request');
    expect(await codeOf(fs.readFile('/workspace/plain/x'))).toBe('bad_request');
  });

  it('follows links inside the root, absolute ones too, and acts on a link itself for delete and move', async () => {
    mkdirSync(join(ws(), 'real-dir'));
    writeFileSync(join(ws(), 'real-dir', 'f'), 'inside');
    symlinkSync('real-dir', join(ws(), 'rel-dir'));
    symlinkSync(join(ws(), 'real-dir'), join(ws(), 'abs-dir'));
    symlinkSync('../workspace/./real-dir/f', join(ws(), 'dotted'));
    expect(Buffer.from(await fs.readFile('/workspace/rel-dir/f')).toString()).toBe('inside');
    expect(Buffer.from(await fs.readFile('/workspace/abs-dir/f')).toString()).toBe('inside');
    expect(Buffer.from(await fs.readFile('/workspace/dotted')).toString()).toBe('inside');
    await fs.writeFile('/workspace/rel-dir/g', Buffer.from('via link'), undefined);
    expect(readFileSync(join(ws(), 'real-dir', 'g'), 'utf8')).toBe('via link');
    expect((await fs.stat('/workspace/abs-dir')).is_dir).toBe(true);
    expect((await fs.listFiles('/workspace/rel-dir')).map((i) => i.name)).toEqual(['f', 'g']);
    expect(await fs.hostDir('/workspace/rel-dir')).toBe(join(realpathSync(root), 'sb', 'workspace', 'real-dir'));
    await fs.deleteFile('/workspace/rel-dir', true); // the link goes, not what it points to
    expect(readdirSync(join(ws(), 'real-dir')).sort()).toEqual(['f', 'g']);
    await fs.moveFile('/workspace/abs-dir', '/workspace/moved-link');
    expect(Buffer.from(await fs.readFile('/workspace/moved-link/f')).toString()).toBe('inside');
  });

  it('refuses FIFOs and other non-regular files instead of hanging on them', async () => {
    execFileSync('mkfifo', [join(ws(), 'fifo')]);
    expect(await codeOf(fs.readFile('/workspace/fifo'))).toBe('bad_request');
    expect((await fs.stat('/workspace/fifo')).is_dir).toBe(false);
  });

  it('an overwrite is never seen half-written, and leaves no temporary file', async () => {
    const a = Buffer.alloc(8 * 1024 * 1024, 0x61);
    const b = Buffer.alloc(4 * 1024 * 1024, 0x62);
    await fs.writeFile('/workspace/big.bin', a, undefined);
    let writing = true;
    const writer = (async () => {
      for (let i = 0; i < 20; i++) await fs.writeFile('/workspace/big.bin', i % 2 ? a : b, undefined);
      writing = false;
    })();
    const seen = new Set<string>();
    while (writing) {
      const got = Buffer.from(await fs.readFile('/workspace/big.bin'));
      seen.add(got.equals(a) ? 'a' : got.equals(b) ? 'b' : `partial ${got.length}`);
    }
    await writer;
    expect([...seen].filter((s) => s.startsWith('partial'))).toEqual([]);
    expect(readdirSync(ws()).filter((n) => n.includes('.sbx-write-'))).toEqual([]);
  });

  it('a refused write leaves the old file and nothing else', async () => {
    await fs.writeFile('/workspace/keep.txt', Buffer.from('old'), 0o640);
    mkdirSync(join(ws(), 'a-dir'));
    expect(await codeOf(fs.writeFile('/workspace/a-dir', Buffer.from('new'), undefined))).toBe('bad_request');
    expect(await codeOf(fs.writeFile('/workspace/keep.txt/below', Buffer.from('new'), undefined))).toBe('bad_request');
    expect(readFileSync(join(ws(), 'keep.txt'), 'utf8')).toBe('old');
    expect((await fs.stat('/workspace/keep.txt')).mode).toBe('0640');
    expect(readdirSync(ws()).filter((n) => n.includes('.sbx-write-'))).toEqual([]);
  });
});

describe('malformed paths over HTTP (mock provider)', () => {
  let srv: TestServer;
  let id: string;
  beforeAll(async () => {
    srv = await startTestServer();
    id = (await call(srv.url, 'POST', '/api/v1/sandboxes')).body.id;
  });
  afterAll(async () => srv?.close());
  const f = (method: string, suffix: string, body?: unknown) => call(srv.url, method, `/api/v1/sandboxes/${id}/files${suffix}`, body);
  const q = encodeURIComponent;

  it('answers 400 bad_request with {code, message} for a name over 255 bytes or a very deep path, on every route', async () => {
    const bads = [`/workspace/${long}`, `/workspace/${long}/f.txt`, `/workspace/${'é'.repeat(128)}`, deep(MAX_PATH_DEPTH + 1), deep(1500)];
    for (const p of bads) {
      const cases: Array<[string, string, unknown?]> = [
        ['POST', '', { path: p, content: 'x' }],
        ['POST', `?path=${q(p)}`, 'raw'],
        ['GET', `?path=${q(p)}`],
        ['GET', `/stat?path=${q(p)}`],
        ['GET', `/list?path=${q(p)}`],
        ['DELETE', `?path=${q(p)}&recursive=true`],
        ['POST', '/move', { old_path: '/workspace', new_path: p }],
        ['POST', '/move', { old_path: p, new_path: '/workspace/x' }],
        ['POST', '/chmod', { path: p, mode: '644' }],
        ['GET', `/glob?pattern=${q(p)}`],
      ];
      for (const [m, s, b] of cases) {
        const res =
          b === 'raw'
            ? await fetch(`${srv.url}/api/v1/sandboxes/${id}/files${s}`, {
                method: 'POST',
                headers: { 'content-type': 'application/octet-stream' },
                body: 'x',
              }).then(async (r) => ({ status: r.status, body: await r.json() }))
            : await f(m, s, b);
        const what = `${m} ${s.slice(0, 40)} ${JSON.stringify(b)?.slice(0, 60)}`;
        expect(res.status, what).toBe(400);
        expect(Object.keys(res.body).sort(), what).toEqual(['code', 'message']);
        expect(res.body.code, what).toBe('bad_request');
      }
    }
    const exec = await call(srv.url, 'POST', `/api/v1/sandboxes/${id}/exec`, { command: 'true', workdir: `/workspace/${long}` });
    expect(exec.status).toBe(400);
    expect(exec.body.code).toBe('bad_request');
  });

  it('serves names of 255 bytes and paths at the depth bound', async () => {
    const name = `/workspace/${'y'.repeat(255)}`;
    expect((await f('POST', '', { path: name, content: 'ok' })).status).toBe(200);
    expect(await (await fetch(`${srv.url}/api/v1/sandboxes/${id}/files?path=${q(name)}`)).text()).toBe('ok');
    const deepest = '/workspace' + deep(MAX_PATH_DEPTH - 2);
    expect((await f('POST', '', { path: `${deepest}/f`, content: 'deep' })).status).toBe(200);
    expect((await f('GET', `/stat?path=${q(`${deepest}/f`)}`)).body).toMatchObject({ size: 4, is_dir: false });
    expect((await f('DELETE', `?path=${q('/workspace/a')}&recursive=true`)).status).toBe(200);
  });

  it('glob /* lists the top-level entries only', async () => {
    const res = await f('GET', `/glob?pattern=${q('/*')}`);
    expect(res.status).toBe(200);
    expect(res.body).not.toContain('/');
    expect(res.body).toEqual(expect.arrayContaining(['/tmp', '/workspace']));
  });
});

describe('HostFs trees deeper than the handles it holds', () => {
  let root: string;
  beforeAll(() => {
    root = mkdtempSync(join(tmpdir(), 'sbx-hostfs-deep-'));
    mkdirSync(join(root, 'sb', 'workspace'), { recursive: true });
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it('deletes a tree 700 levels deep recursively, and removes a whole root', async () => {
    const fs = new HostFs(join(root, 'sb'));
    const chain = Array.from({ length: 700 }, () => 'd').join('/');
    execFileSync('mkdir', ['-p', chain], { cwd: join(root, 'sb', 'workspace') });
    execFileSync('sh', ['-c', `echo leaf > ${chain}/leaf.txt && ln -s / ${chain}/to-host-root`], { cwd: join(root, 'sb', 'workspace') });
    // A glob over it stops descending at the bound instead of failing.
    expect(await fs.glob('/workspace/**/leaf.txt')).toEqual([]);
    await fs.deleteFile('/workspace/d', true);
    expect(readdirSync(join(root, 'sb', 'workspace'))).toEqual([]);

    execFileSync('mkdir', ['-p', chain], { cwd: join(root, 'sb', 'workspace') });
    await fs.removeRoot();
    expect(readdirSync(root)).toEqual([]);
    await fs.removeRoot(); // idempotent
    expect(await codeOf(fs.stat('/'))).toBe('not_found');
  });
});
