import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Provider } from '../../src/core/ports/index.js';
import { expectSbxError } from './provider-contract-helpers.js';
import type { ContractOptions, ProviderFixture } from './provider.contract.js';

/**
 * Path edge cases of the Provider file methods (issue 12, points 6 and 7), run by every provider
 * test file next to the main contract: globs at the top level, names at the NAME_MAX limit, deep
 * paths, whole-file overwrites. Requests over the limits never reach a provider through the API
 * (core refuses them); host-backed providers refuse them on their own as well.
 */
const notRegistered = (..._args: unknown[]): void => undefined;

export function runProviderPathContract(name: string, factory: () => Promise<ProviderFixture>, options: ContractOptions = {}): void {
  describe(`Provider path contract: ${name}`, () => {
    let fx: ProviderFixture | undefined;
    let p: Provider;
    let rid: string;

    beforeAll(async () => {
      fx = await factory();
      p = fx.provider;
      const sandbox_id = `sb-pc${randomBytes(5).toString('hex')}`;
      rid = (
        await p.spawn({ sandbox_id, image: fx.image, memory_mb: 256, vcpus: 1, metadata: { suite: 'provider-paths' }, owner_id: null })
      ).runtime_id;
    });
    afterAll(async () => {
      if (rid) await p?.destroy(rid).catch(() => undefined);
      await p?.close?.();
      await fx?.cleanup();
    });

    const write = (path: string, content: string | Uint8Array, mode?: number) =>
      p.writeFile(rid, path, typeof content === 'string' ? Buffer.from(content) : content, mode);
    const read = async (path: string) => Buffer.from(await p.readFile(rid, path)).toString();

    it('glob /* lists the top-level entries, never / itself', async () => {
      await write('/workspace/pc/one.txt', '1');
      const top = await p.glob(rid, '/*');
      expect(top).not.toContain('/');
      expect(top).toEqual(expect.arrayContaining(['/tmp', '/workspace']));
      for (const m of top) expect(m, m).toMatch(/^\/[^/]+$/);
      expect(top).toEqual([...top].sort());
      // The same below the top: a directory is not among the matches of `<dir>/*`.
      expect(await p.glob(rid, '/workspace/pc/*')).toEqual(['/workspace/pc/one.txt']);
      expect(await p.glob(rid, '/*/pc')).toEqual(['/workspace/pc']);
      expect(await p.glob(rid, '/workspace/pc')).toEqual(['/workspace/pc']);
    });

    it('names of 255 bytes work for every operation', async () => {
      const ascii = 'n'.repeat(251) + '.txt';
      const multi = 'é'.repeat(127) + 'x'; // 2-byte characters: 255 bytes
      expect(Buffer.byteLength(ascii)).toBe(255);
      expect(Buffer.byteLength(multi)).toBe(255);
      for (const n of [ascii, multi]) {
        const path = `/workspace/long/${n}`;
        await write(path, 'long name', 0o640);
        expect(await read(path)).toBe('long name');
        expect(await p.stat(rid, path)).toMatchObject({ name: n, path, size: 9, is_dir: false, mode: '0640' });
        expect((await p.listFiles(rid, '/workspace/long')).map((f) => f.name)).toContain(n);
        expect(await p.glob(rid, '/workspace/long/*')).toContain(path);
        await p.chmod(rid, path, 0o600);
        await p.moveFile(rid, path, `${path.slice(0, -1)}y`);
        expect(await read(`${path.slice(0, -1)}y`)).toBe('long name');
        await p.deleteFile(rid, `${path.slice(0, -1)}y`, false);
        await expectSbxError(p.stat(rid, `${path.slice(0, -1)}y`), ['not_found'], 'stat after delete');
      }
    });

    it('deep paths work: parents created, read, listed, deleted recursively', async () => {
      const dir = '/workspace/deep/' + Array.from({ length: 64 }, (_, i) => `d${i}`).join('/');
      await write(`${dir}/f.txt`, 'deep');
      expect(await read(`${dir}/f.txt`)).toBe('deep');
      expect((await p.stat(rid, dir)).is_dir).toBe(true);
      expect((await p.listFiles(rid, dir)).map((f) => f.name)).toEqual(['f.txt']);
      expect(await p.glob(rid, '/workspace/deep/**/f.txt')).toEqual([`${dir}/f.txt`]);
      await p.deleteFile(rid, '/workspace/deep', true);
      await expectSbxError(p.stat(rid, '/workspace/deep'), ['not_found'], 'stat after recursive delete');
    });

    it('an overwrite replaces the whole file and leaves nothing else behind', async () => {
      const big = Buffer.alloc(1024 * 1024 + 3, 0x61);
      await write('/workspace/ow/f.bin', big, 0o600);
      await write('/workspace/ow/f.bin', 'small');
      expect(await read('/workspace/ow/f.bin')).toBe('small');
      expect((await p.stat(rid, '/workspace/ow/f.bin')).mode).toBe('0600');
      expect((await p.listFiles(rid, '/workspace/ow')).map((f) => f.name)).toEqual(['f.bin']);
      // A refused write (onto a directory) leaves nothing either.
      await expectSbxError(write('/workspace/ow', 'x'), ['bad_request'], 'write onto a directory');
      expect((await p.listFiles(rid, '/workspace/ow')).map((f) => f.name)).toEqual(['f.bin']);
    });

    // Host-backed providers check names themselves, so a caller that skips core's checks still gets a 400.
    (options.hostFilesystem === true ? it : notRegistered)(
      'names over 255 bytes are bad_request for every operation (host-backed runtimes)',
      async () => {
        const path = `/workspace/${'z'.repeat(256)}`;
        const bad = ['bad_request' as const];
        await expectSbxError(write(path, 'x'), bad, 'write');
        await expectSbxError(write(`${path}/below`, 'x'), bad, 'write below');
        await expectSbxError(p.readFile(rid, path), bad, 'read');
        await expectSbxError(p.stat(rid, path), bad, 'stat');
        await expectSbxError(p.listFiles(rid, path), bad, 'list');
        await expectSbxError(p.deleteFile(rid, path, true), bad, 'delete');
        await expectSbxError(p.chmod(rid, path, 0o644), bad, 'chmod');
        await write('/workspace/short', 'x');
        await expectSbxError(p.moveFile(rid, '/workspace/short', path), bad, 'move onto');
        await expectSbxError(p.moveFile(rid, path, '/workspace/other'), bad, 'move from');
        expect(await p.glob(rid, `${path}/*`)).toEqual([]);
      },
    );
  });
}
