import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SbxError, type ErrorCode } from '../../src/core/errors.js';
import type { ExecControl, ExecSpec, FileInfo, Provider } from '../../src/core/ports/index.js';
import { collect, type Collected, expectSbxError, LiveChunks, never, sh, sleep, within } from './provider-contract-helpers.js';

/** What a provider test file hands the contract: a ready provider, an image it can spawn, and a teardown. */
export interface ProviderFixture {
  provider: Provider;
  image: string;
  cleanup: () => Promise<void>;
}

const REQUIRED_CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health'];
const MODE_RE = /^0[0-7]{3,4}$/;

/**
 * The Provider port contract (src/core/ports.ts). Every provider runs this suite unchanged; the
 * factory is called once and the suite spawns the sandboxes it needs.
 */
/** What a provider's runtime shares with the host: host-backed runtimes (mock, proot) get the symlink-escape checks. */
export interface ContractOptions {
  hostFilesystem?: boolean;
}

const notRegistered = (..._args: unknown[]): void => undefined;

export function runProviderContract(name: string, factory: () => Promise<ProviderFixture>, options: ContractOptions = {}): void {
  describe(`Provider contract: ${name}`, () => {
    let fx: ProviderFixture | undefined;
    let p: Provider;
    let rid: string;
    const spawned: string[] = [];

    async function spawnOne(): Promise<string> {
      const sandbox_id = `sb-ct${randomBytes(5).toString('hex')}`;
      const res = await p.spawn({
        sandbox_id,
        image: fx!.image,
        memory_mb: 256,
        vcpus: 1,
        metadata: { suite: 'provider-contract' },
        owner_id: null,
      });
      spawned.push(res.runtime_id);
      return res.runtime_id;
    }
    const run = async (spec: ExecSpec, runtimeId = rid): Promise<Collected> => {
      const res = await within(collect(p.exec(runtimeId, spec, never)), 15_000, `exec ${spec.command}`);
      expect(res.exitCode, `exec ${spec.command} yields an exit event`).not.toBeNull();
      return res;
    };
    const write = (path: string, content: string | Uint8Array, mode?: number) =>
      p.writeFile(rid, path, typeof content === 'string' ? Buffer.from(content) : content, mode);
    const missing = async (path: string) => (await expectSbxError(p.stat(rid, path), ['not_found'], `stat ${path}`)).code;

    beforeAll(async () => {
      fx = await factory();
      p = fx.provider;
      rid = await spawnOne();
    });
    afterAll(async () => {
      for (const r of spawned) await p?.destroy(r).catch(() => undefined);
      await p?.close?.();
      await fx?.cleanup();
    });

    // ------------------------------------------------------------ identity, health, lifecycle

    it('declares a name, the base capabilities and a public config', () => {
      expect(typeof p.name).toBe('string');
      expect(p.name.length).toBeGreaterThan(0);
      expect(p.capabilities).toEqual(expect.arrayContaining(REQUIRED_CAPABILITIES));
      const cfg = p.config();
      expect(typeof cfg.runtime).toBe('string');
      expect(typeof cfg.network_mode).toBe('string');
      expect(() => JSON.stringify(cfg)).not.toThrow();
    });

    it('reports health with a latency', async () => {
      const h = await within(p.health(), 10_000, 'health');
      expect(h.healthy, h.error).toBe(true);
      expect(Number.isFinite(h.latency_ms)).toBe(true);
      expect(h.latency_ms).toBeGreaterThanOrEqual(0);
      expect(h.error).toBeUndefined();
      if (h.runtime_count !== undefined) expect(h.runtime_count).toBeGreaterThanOrEqual(1);
    });

    it('spawns a running runtime that the inventory lists', async () => {
      expect(typeof rid).toBe('string');
      expect(rid.length).toBeGreaterThan(0);
      expect(await p.status(rid)).toBe('running');
      if (p.listRuntimes) {
        const rt = (await p.listRuntimes()).find((r) => r.runtime_id === rid);
        expect(rt).toBeDefined();
        expect(rt!.status).toBe('running');
      }
    });

    // ------------------------------------------------------------ exec

    it('exec shell mode: stdout, exit code, separate stderr, command not found', async () => {
      expect(await run(sh('echo hi'))).toMatchObject({ stdout: 'hi\n', stderr: '', exitCode: 0 });
      expect((await run(sh('exit 3'))).exitCode).toBe(3);
      expect(await run(sh('echo out; echo err >&2; exit 1'))).toMatchObject({ stdout: 'out\n', stderr: 'err\n', exitCode: 1 });
      const nf = await run(sh('sbx-no-such-command-xyz'));
      expect(nf.exitCode).toBe(127);
      expect(nf.stderr).toMatch(/not found/);
    });

    it('exec passes env and honours workdir (default /workspace)', async () => {
      const env = { FOO: 'bar baz', QUOTED: `it's "$HOME" \\ \`x\``, EMPTY: '' };
      expect((await run(sh('printf "%s|%s|%s" "$FOO" "$QUOTED" "$EMPTY"', { env }))).stdout).toBe(`bar baz|${env.QUOTED}|`);
      await write('/workspace/sub dir/x', '');
      expect((await run(sh('pwd', { workdir: '/workspace/sub dir' }))).stdout).toMatch(/\/workspace\/sub dir\n$/);
      const { workdir: _omit, ...noWorkdir } = sh('pwd');
      expect((await run(noWorkdir)).stdout).toMatch(/\/workspace\n$/);
    });

    it('exec in a missing workdir fails instead of running elsewhere', async () => {
      const outcome = await within(
        collect(p.exec(rid, sh('pwd', { workdir: '/workspace/no-such-dir' }), never)).then(
          (res) => res,
          (err: unknown) => err,
        ),
        10_000,
        'exec in a missing workdir',
      );
      if (outcome instanceof Error) {
        expect(outcome).toBeInstanceOf(SbxError);
        expect(['bad_request', 'not_found']).toContain((outcome as SbxError).code);
      } else {
        expect((outcome as Collected).exitCode).not.toBe(0);
        expect((outcome as Collected).stdout).toBe('');
      }
    });

    it('exec argv mode runs the argv without a shell', async () => {
      const args = ['%s|', 'a b', "it's", '$HOME', '"q"', '*', '$(id)', ''];
      const res = await run({ command: 'printf', args, mode: 'argv', env: {}, workdir: '/workspace' });
      expect(res).toMatchObject({ stdout: `a b|it's|$HOME|"q"|*|$(id)||`, exitCode: 0 });
      const nf = await run({ command: 'sbx-no-such-command-xyz', args: [], mode: 'argv', env: {}, workdir: '/workspace' });
      expect(nf.exitCode).toBeGreaterThan(0);
    });

    it('exec shell mode quotes args', async () => {
      const res = await run(sh('printf "%s|"', { args: ['a b', '$HOME', "it's", '`id`', ';echo x', ''] }));
      expect(res.stdout).toBe("a b|$HOME|it's|`id`|;echo x||");
    });

    it('exec feeds stdin then EOF, binary safe; no stdin is empty', async () => {
      expect((await run(sh('cat', { stdin: Buffer.from('hello\nworld') }))).stdout).toBe('hello\nworld');
      const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      expect((await run(sh('cat', { stdin: all }))).stdoutBytes.equals(all)).toBe(true);
      expect(await run(sh('cat'))).toMatchObject({ stdout: '', exitCode: 0 });
    });

    it('exec with live stdin: each chunk reaches the command as it arrives, EOF at the end', async () => {
      const chunks = new LiveChunks();
      const iter = p.exec(rid, sh('cat; echo "[eof]"', { stdin: chunks }), never)[Symbol.asyncIterator]();
      const readUntil = async (text: string) => {
        let seen = '';
        while (!seen.includes(text)) {
          const r = await within(iter.next(), 10_000, `output ${JSON.stringify(text)}`);
          expect(r.done, `ended before ${JSON.stringify(text)}`).toBe(false);
          if (r.value!.stream === 'stdout') seen += Buffer.from(r.value!.data).toString();
        }
        return seen;
      };
      chunks.push('first\n');
      // The command answers the first chunk while the second one has not been sent yet.
      expect(await readUntil('first\n')).toBe('first\n');
      await sleep(100);
      chunks.push(Buffer.from([0x73, 0x65, 0x63, 0x6f, 0x6e, 0x64, 0x0a])); // "second\n"
      expect(await readUntil('second\n')).toBe('second\n');
      chunks.end();
      const rest = await within(collect({ [Symbol.asyncIterator]: () => iter }), 10_000, 'exec after EOF');
      expect(rest.stdout).toBe('[eof]\n');
      expect(rest.exitCode).toBe(0);
      // A command that never reads stdin ends by itself, and its source is released.
      const idle = new LiveChunks();
      expect(await run(sh('echo done', { stdin: idle }))).toMatchObject({ stdout: 'done\n', exitCode: 0 });
      await within(idle.released, 3_000, 'stdin source released');
    });

    it('exec with signal controls: SIGTERM reaches the command', async () => {
      const controls = new LiveChunks<ExecControl>();
      const iter = p.exec(rid, sh('echo ready; exec sleep 30', { controls }), never)[Symbol.asyncIterator]();
      expect((await within(iter.next(), 10_000, 'first chunk')).value).toMatchObject({ stream: 'stdout' });
      controls.push({ type: 'signal', signal: 'SIGTERM' });
      const rest = await within(collect({ [Symbol.asyncIterator]: () => iter }), 10_000, 'signalled exec');
      expect(rest.exitCode).toBe(143);
    });

    it('exec delivers large output completely', async () => {
      const res = await run(sh('head -c 1048576 /dev/zero; echo done >&2'));
      expect(res.stdoutBytes.length).toBe(1048576);
      expect(res.stdoutBytes.every((b) => b === 0)).toBe(true);
      expect(res.stderr).toBe('done\n');
    });

    it('exec streams: the first chunk arrives before the command ends', async () => {
      const started = Date.now();
      const iter = p.exec(rid, sh('echo a; sleep 2; echo b'), never)[Symbol.asyncIterator]();
      const first = await within(iter.next(), 5_000, 'first chunk');
      expect(Date.now() - started).toBeLessThan(1_500);
      expect(first.done).toBe(false);
      expect(first.value).toMatchObject({ stream: 'stdout' });
      const rest = await collect({ [Symbol.asyncIterator]: () => iter });
      expect(Buffer.from((first.value as { data: Uint8Array }).data).toString() + rest.stdout).toBe('a\nb\n');
      expect(rest.exitCode).toBe(0);
    });

    it('exec abort kills the whole process tree and ends promptly', async () => {
      const ac = new AbortController();
      const cmd = '(touch abort-started; echo go; sleep 1; touch abort-late) & sleep 30; wait';
      const iter = p.exec(rid, sh(cmd), ac.signal)[Symbol.asyncIterator]();
      expect((await within(iter.next(), 5_000, 'first chunk')).value).toMatchObject({ stream: 'stdout' });
      await sleep(300);
      const abortedAt = Date.now();
      ac.abort(new Error('deadline'));
      const rest = await within(collect({ [Symbol.asyncIterator]: () => iter }), 3_000, 'aborted exec');
      expect(Date.now() - abortedAt).toBeLessThan(3_000);
      if (rest.exitCode !== null) expect(rest.exitCode).not.toBe(0);
      await sleep(Math.max(0, abortedAt + 2_000 - Date.now()));
      expect((await p.stat(rid, '/workspace/abort-started')).is_dir).toBe(false);
      expect(await missing('/workspace/abort-late')).toBe('not_found');
    });

    it('exec: a consumer that stops iterating early kills the command', async () => {
      const cmd = '(touch break-started; echo go; sleep 1; touch break-late) & sleep 30; wait';
      const started = Date.now();
      for await (const ev of p.exec(rid, sh(cmd), never)) {
        expect(ev.stream).toBe('stdout');
        break;
      }
      expect(Date.now() - started).toBeLessThan(5_000);
      await sleep(2_000);
      expect((await p.stat(rid, '/workspace/break-started')).is_dir).toBe(false);
      expect(await missing('/workspace/break-late')).toBe('not_found');
    });

    it('exec with an already aborted signal ends promptly', async () => {
      const ac = new AbortController();
      ac.abort(new Error('cancelled'));
      const res = await within(collect(p.exec(rid, sh('sleep 30'), ac.signal)), 3_000, 'pre-aborted exec');
      if (res.exitCode !== null) expect(res.exitCode).not.toBe(0);
    });

    // ------------------------------------------------------------ files

    it('writes and reads text and binary files; parents created; mode applied', async () => {
      await write('/workspace/a/b/hello.txt', 'hi there\n', 0o640);
      expect(Buffer.from(await p.readFile(rid, '/workspace/a/b/hello.txt')).toString()).toBe('hi there\n');
      const st = await p.stat(rid, '/workspace/a/b/hello.txt');
      expect(st).toMatchObject({ name: 'hello.txt', path: '/workspace/a/b/hello.txt', size: 9, is_dir: false, mode: '0640' });
      expect((await p.stat(rid, '/workspace/a/b')).is_dir).toBe(true);

      const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      await write('/workspace/bin.dat', all);
      expect(Buffer.from(await p.readFile(rid, '/workspace/bin.dat')).equals(all)).toBe(true);
      expect((await p.stat(rid, '/workspace/bin.dat')).mode).toBe('0644');

      await write('/workspace/bin.dat', 'short');
      expect(Buffer.from(await p.readFile(rid, '/workspace/bin.dat')).toString()).toBe('short');
      await write('/workspace/empty', '');
      expect((await p.readFile(rid, '/workspace/empty')).byteLength).toBe(0);
      expect((await p.stat(rid, '/workspace/empty')).size).toBe(0);
      // Files written through the API are visible to commands, and the other way round.
      expect((await run(sh('cat a/b/hello.txt; printf made > made-by-exec'))).stdout).toBe('hi there\n');
      expect(Buffer.from(await p.readFile(rid, '/workspace/made-by-exec')).toString()).toBe('made');
    });

    it('lists a directory sorted by name with FileInfo fields', async () => {
      await write('/workspace/ls/b.txt', 'bb');
      await write('/workspace/ls/a.txt', 'a');
      await write('/workspace/ls/c/inner.txt', 'c');
      const items = await p.listFiles(rid, '/workspace/ls');
      expect(items.map((i) => i.name)).toEqual(['a.txt', 'b.txt', 'c']);
      for (const item of items) {
        expect(Object.keys(item).sort()).toEqual(['is_dir', 'mod_time', 'mode', 'name', 'path', 'size']);
        expect(item.mode).toMatch(MODE_RE);
        expect(Math.abs(Date.parse(item.mod_time) - Date.now())).toBeLessThan(10 * 60_000);
      }
      expect(items[0]).toMatchObject({ name: 'a.txt', path: '/workspace/ls/a.txt', size: 1, is_dir: false, mode: '0644' });
      expect(items[2]).toMatchObject({ name: 'c', path: '/workspace/ls/c', is_dir: true });
      const root = await p.stat(rid, '/');
      expect(root).toMatchObject({ path: '/', is_dir: true });
      expect((await p.listFiles(rid, '/')).map((i) => i.name)).toEqual(expect.arrayContaining(['tmp', 'workspace']));
    });

    it('stats files and directories, chmod changes the mode (special bits too)', async () => {
      await write('/workspace/ch/run.sh', 'echo ok\n');
      const dir: FileInfo = await p.stat(rid, '/workspace/ch');
      expect(dir).toMatchObject({ name: 'ch', path: '/workspace/ch', is_dir: true });
      expect(dir.mode).toMatch(MODE_RE);
      await p.chmod(rid, '/workspace/ch/run.sh', 0o755);
      expect((await p.stat(rid, '/workspace/ch/run.sh')).mode).toBe('0755');
      await p.chmod(rid, '/workspace/ch', 0o1777);
      expect((await p.stat(rid, '/workspace/ch')).mode).toBe('01777');
      expect((await run(sh('./ch/run.sh'))).stdout).toBe('ok\n');
    });

    it('moves files', async () => {
      await write('/workspace/mv/from.txt', 'moving');
      await p.moveFile(rid, '/workspace/mv/from.txt', '/workspace/mv/to.txt');
      expect(Buffer.from(await p.readFile(rid, '/workspace/mv/to.txt')).toString()).toBe('moving');
      expect(await missing('/workspace/mv/from.txt')).toBe('not_found');
      await expectSbxError(p.moveFile(rid, '/workspace/mv/nope', '/workspace/mv/x'), ['not_found'], 'move missing');
    });

    it('globs with *, **, ? and [...], sorted absolute paths', async () => {
      for (const f of ['one.txt', 'two.txt', 'skip.md', 'deep/three.txt', 'deep/er/four.txt']) await write(`/workspace/g/${f}`, f);
      expect(await p.glob(rid, '/workspace/g/*.txt')).toEqual(['/workspace/g/one.txt', '/workspace/g/two.txt']);
      expect(await p.glob(rid, '/workspace/g/**/*.txt')).toEqual([
        '/workspace/g/deep/er/four.txt',
        '/workspace/g/deep/three.txt',
        '/workspace/g/one.txt',
        '/workspace/g/two.txt',
      ]);
      expect(await p.glob(rid, '/workspace/g/?wo.txt')).toEqual(['/workspace/g/two.txt']);
      expect(await p.glob(rid, '/workspace/g/[os]*')).toEqual(['/workspace/g/one.txt', '/workspace/g/skip.md']);
      expect(await p.glob(rid, '/workspace/g/*/*.txt')).toEqual(['/workspace/g/deep/three.txt']);
      expect(await p.glob(rid, '/workspace/g/*.none')).toEqual([]);
      expect(await p.glob(rid, '/workspace/nowhere/*')).toEqual([]);
    });

    it('deletes files and directories; non-empty needs recursive', async () => {
      await write('/workspace/del/keep/f.txt', 'f');
      await write('/workspace/del/file.txt', 'x');
      await p.deleteFile(rid, '/workspace/del/file.txt', false);
      expect(await missing('/workspace/del/file.txt')).toBe('not_found');
      await expectSbxError(p.deleteFile(rid, '/workspace/del', false), ['bad_request'], 'delete non-empty dir');
      expect((await p.stat(rid, '/workspace/del/keep/f.txt')).size).toBe(1);
      await p.deleteFile(rid, '/workspace/del/keep/f.txt', false);
      await p.deleteFile(rid, '/workspace/del/keep', false);
      expect(await missing('/workspace/del/keep')).toBe('not_found');
      await write('/workspace/del/again/deeper/f.txt', 'f');
      await p.deleteFile(rid, '/workspace/del', true);
      expect(await missing('/workspace/del')).toBe('not_found');
    });

    it('readFile refuses a directory and a file over maxBytes; at the limit it reads', async () => {
      await write('/workspace/limit/ten.bin', Buffer.alloc(10, 7));
      await expectSbxError(p.readFile(rid, '/workspace/limit'), ['bad_request'], 'read a directory');
      const over = await expectSbxError(
        p.readFile(rid, '/workspace/limit/ten.bin', undefined, 9),
        ['payload_too_large'],
        'read over maxBytes',
      );
      expect(over.message).toBe('file is 10 bytes; the limit is 9');
      expect(Buffer.from(await p.readFile(rid, '/workspace/limit/ten.bin', undefined, 10)).equals(Buffer.alloc(10, 7))).toBe(true);
      await expectSbxError(p.readFile(rid, '/workspace/limit/none', undefined, 10), ['not_found'], 'read missing with maxBytes');
    });

    it('openFile (when offered) streams exactly the file, refuses like readFile, and can be ended early', async () => {
      if (!p.openFile) return;
      const big = Buffer.alloc(3 * 1024 * 1024 + 17);
      for (let i = 0; i < big.length; i += 4096) big[i] = (i / 4096) & 0xff;
      await write('/workspace/open/big.bin', big);
      const file = await p.openFile(rid, '/workspace/open/big.bin');
      expect(file.size).toBe(big.length);
      const chunks: Buffer[] = [];
      for await (const c of file.body) chunks.push(Buffer.from(c));
      expect(chunks.length).toBeGreaterThan(1);
      expect(Buffer.concat(chunks).equals(big)).toBe(true);

      await expectSbxError(p.openFile(rid, '/workspace/open'), ['bad_request'], 'open a directory');
      await expectSbxError(p.openFile(rid, '/workspace/open/big.bin', undefined, 1024), ['payload_too_large'], 'open over maxBytes');
      await expectSbxError(p.openFile(rid, '/workspace/open/none'), ['not_found'], 'open missing');
      // Ended after one chunk, and ended before any: the runtime serves the next read as usual.
      for (const take of [1, 0]) {
        const it = (await p.openFile(rid, '/workspace/open/big.bin')).body[Symbol.asyncIterator]();
        for (let i = 0; i < take; i++) expect((await it.next()).done).toBe(false);
        await it.return?.();
      }
      expect(Buffer.from(await p.readFile(rid, '/workspace/open/big.bin')).equals(big)).toBe(true);
    });

    it('missing paths throw not_found', async () => {
      const m = '/workspace/definitely/missing';
      await expectSbxError(p.readFile(rid, m), ['not_found'], 'read');
      await expectSbxError(p.stat(rid, m), ['not_found'], 'stat');
      await expectSbxError(p.deleteFile(rid, m, false), ['not_found'], 'delete');
      await expectSbxError(p.deleteFile(rid, m, true), ['not_found'], 'delete recursive');
      await expectSbxError(p.listFiles(rid, m), ['not_found'], 'list');
      await expectSbxError(p.chmod(rid, m, 0o644), ['not_found'], 'chmod');
    });

    // A container's symlinks resolve inside its own root; only host-backed runtimes can be escaped this way,
    // so the check is registered for those alone (not reported as skipped for the others).
    (options.hostFilesystem === true ? it : notRegistered)(
      'does not follow symlinks that leave the sandbox (host-backed runtimes)',
      async () => {
        const outside = mkdtempSync(join(tmpdir(), 'sbx-outside-'));
        try {
          const secret = join(outside, 'secret.txt');
          writeFileSync(secret, 'top-secret');
          chmodSync(secret, 0o600);
          const q = (s: string) => `'${s}'`;
          const links =
            `mkdir -p esc && cd esc && ln -s ${q(outside)} dirlink && ln -s ${q(secret)} filelink ` +
            `&& ln -s ${q(join(outside, 'new.txt'))} danglink`;
          expect((await run(sh(links))).exitCode).toBe(0);
          const codes: ErrorCode[] = ['bad_request', 'forbidden', 'not_found'];
          await expectSbxError(p.readFile(rid, '/workspace/esc/filelink'), codes, 'read via file link');
          await expectSbxError(p.readFile(rid, '/workspace/esc/dirlink/secret.txt'), codes, 'read via dir link');
          await expectSbxError(p.stat(rid, '/workspace/esc/dirlink/secret.txt'), codes, 'stat via dir link');
          await expectSbxError(p.listFiles(rid, '/workspace/esc/dirlink'), codes, 'list via dir link');
          await expectSbxError(write('/workspace/esc/dirlink/evil.txt', 'evil'), codes, 'write via dir link');
          await expectSbxError(write('/workspace/esc/dirlink/sub/evil.txt', 'evil'), codes, 'write below dir link');
          await expectSbxError(write('/workspace/esc/danglink', 'evil'), codes, 'write via dangling link');
          await expectSbxError(write('/workspace/esc/filelink', 'evil'), codes, 'overwrite via file link');
          await expectSbxError(p.chmod(rid, '/workspace/esc/filelink', 0o777), codes, 'chmod via file link');
          await expectSbxError(p.deleteFile(rid, '/workspace/esc/dirlink/secret.txt', false), codes, 'delete via dir link');
          await write('/workspace/esc/mine.txt', 'mine');
          await expectSbxError(p.moveFile(rid, '/workspace/esc/mine.txt', '/workspace/esc/dirlink/mine.txt'), codes, 'move into dir link');
          const globbed = await p.glob(rid, '/workspace/esc/**');
          expect(globbed.some((g) => g.includes('secret.txt'))).toBe(false);

          expect(readFileSync(secret, 'utf8')).toBe('top-secret');
          expect(statSync(secret).mode & 0o7777).toBe(0o600);
          expect(existsSync(join(outside, 'evil.txt'))).toBe(false);
          expect(existsSync(join(outside, 'sub'))).toBe(false);
          expect(existsSync(join(outside, 'new.txt'))).toBe(false);
          expect(existsSync(join(outside, 'mine.txt'))).toBe(false);
          // Removing the link itself is an in-sandbox operation and leaves the target alone.
          await p.deleteFile(rid, '/workspace/esc/dirlink', false);
          expect(existsSync(secret)).toBe(true);
        } finally {
          rmSync(outside, { recursive: true, force: true });
        }
      },
    );

    // ------------------------------------------------------------ console logs

    it('console logs hold exec output lines and honour lines', async () => {
      const fresh = await spawnOne();
      await run(sh('echo logline1; echo logline2; echo logline3'), fresh);
      await run(sh('echo errline >&2'), fresh);
      await run(sh('printf partial'), fresh);
      expect(await p.logs(fresh, { lines: 100 })).toEqual({ lines: ['logline1', 'logline2', 'logline3', 'errline', 'partial'], cursor: 5 });
      expect((await p.logs(fresh, { lines: 2 })).lines).toEqual(['errline', 'partial']);
      expect((await p.logs(fresh, { lines: 1 })).lines).toEqual(['partial']);
    });

    it('console cursors number every line, so repeated lines are told apart', async () => {
      const fresh = await spawnOne();
      expect(await p.logs(fresh, { lines: 0 })).toEqual({ lines: [], cursor: 0 });
      await run(sh('echo ok; echo ok; echo; echo ok'), fresh);
      expect(await p.logs(fresh, { lines: 0 })).toEqual({ lines: [], cursor: 4 });
      expect(await p.logs(fresh, { lines: 100, after: 1 })).toEqual({ lines: ['ok', '', 'ok'], cursor: 4 });
      expect(await p.logs(fresh, { lines: 2, after: 0 })).toEqual({ lines: ['ok', 'ok'], cursor: 2 });
      expect(await p.logs(fresh, { lines: 100, after: 4 })).toEqual({ lines: [], cursor: 4 });
      await run(sh('echo ok'), fresh);
      expect(await p.logs(fresh, { lines: 100, after: 4 })).toEqual({ lines: ['ok'], cursor: 5 });
      // A cursor from an earlier ring of the runtime starts over.
      expect(await p.logs(fresh, { lines: 100, after: 99 })).toEqual({ lines: ['ok', 'ok', '', 'ok', 'ok'], cursor: 5 });
    });

    // ------------------------------------------------------------ isolation and destroy

    it('keeps sandboxes apart, destroys idempotently, and fails cleanly afterwards', async () => {
      const other = await spawnOne();
      expect(other).not.toBe(rid);
      await write('/workspace/only-in-first.txt', 'x');
      await expectSbxError(p.stat(other, '/workspace/only-in-first.txt'), ['not_found'], 'isolation');
      await p.writeFile(other, '/workspace/f.txt', Buffer.from('f'), undefined);

      await p.destroy(other);
      expect(await p.status(other)).toBe('missing');
      await p.destroy(other);
      if (p.listRuntimes) expect((await p.listRuntimes()).some((r) => r.runtime_id === other)).toBe(false);

      const gone: ErrorCode[] = ['not_found', 'provider_error'];
      await expectSbxError(collect(p.exec(other, sh('echo hi'), never)), gone, 'exec after destroy');
      await expectSbxError(p.writeFile(other, '/workspace/g.txt', Buffer.from('g'), undefined), gone, 'write after destroy');
      await expectSbxError(p.readFile(other, '/workspace/f.txt'), gone, 'read after destroy');
      await expectSbxError(p.stat(other, '/workspace'), gone, 'stat after destroy');
      await expectSbxError(p.listFiles(other, '/'), gone, 'list after destroy');
      await expectSbxError(p.deleteFile(other, '/workspace/f.txt', false), gone, 'delete after destroy');
      await expectSbxError(p.moveFile(other, '/workspace/f.txt', '/workspace/h.txt'), gone, 'move after destroy');
      await expectSbxError(p.chmod(other, '/workspace/f.txt', 0o600), gone, 'chmod after destroy');
      await expectSbxError(p.glob(other, '/workspace/*'), gone, 'glob after destroy');
      await expectSbxError(p.logs(other, { lines: 10 }), gone, 'logs after destroy');
      await expectSbxError(p.logs(other, { lines: 10, after: 0 }), gone, 'logs after a cursor after destroy');
      expect(await p.status(other)).toBe('missing');

      expect(await p.status('sb-never-existed')).toBe('missing');
      await p.destroy('sb-never-existed');
      expect(await p.status(rid)).toBe('running');
    });
  });
}
