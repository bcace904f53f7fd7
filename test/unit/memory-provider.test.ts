/**
 * The in-memory provider beyond the shared contract: it is for tests only (no config or catalogue
 * names it), its pool workspaces keep their links inside them, and its snapshots and volumes are
 * listed for reconciliation.
 */
import { describe, expect, it } from 'vitest';
import { PROVIDER_CATALOGUE } from '../../src/adapters/providers/catalog.js';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { loadConfig } from '../../src/config/index.js';
import { collect, never, sh } from '../contract/provider-contract-helpers.js';

const spec = (id: string) => ({ sandbox_id: id, image: 'memory', memory_mb: 64, vcpus: 1, metadata: {}, owner_id: null });

describe('in-memory provider', () => {
  it('is in no catalogue and no config can name it', async () => {
    expect(PROVIDER_CATALOGUE.map((e) => e.name)).not.toContain('memory');
    await expect(
      loadConfig({ cwd: '/nonexistent-sbx', home: '/nonexistent-sbx', env: {}, overrides: { providers: { default: 'memory' } } as never }),
    ).rejects.toThrow(/providers\.default/);
  });

  it('a pool workspace is a view rooted at /workspace/<name>: absolute links resolve inside it', async () => {
    const p = createMemoryProvider();
    const rid = (await p.spawn(spec('pool-1'))).runtime_id;
    const a = p.workspace!(rid, { name: 'sb-a', uid: 10000, gid: 10000 });
    const b = p.workspace!(rid, { name: 'sb-b', uid: 10001, gid: 10001 });
    await a.prepare();
    await b.prepare();
    await b.writeFile('/secret.txt', Buffer.from('b-secret'), 0o600);
    // A's link names B's file by its runtime path; through A's API view it resolves inside A.
    await collect(a.exec(sh('ln -s /workspace/sb-b/secret.txt link; ln -s /workspace/sb-b dir', { workdir: '/' }), never));
    await expect(a.readFile('/link')).rejects.toMatchObject({ code: 'not_found' });
    await expect(a.listFiles('/dir')).rejects.toMatchObject({ code: 'not_found' });
    // A write through the link lands inside A (where the link points in A's view), never in B.
    await a.writeFile('/dir/evil.txt', Buffer.from('x'), undefined);
    expect(Buffer.from(await a.readFile('/workspace/sb-b/evil.txt')).toString()).toBe('x');
    expect(Buffer.from(await b.readFile('/secret.txt')).toString()).toBe('b-secret');
    expect((await b.listFiles('/')).map((f) => f.name)).toEqual(['secret.txt']);
    expect(await a.glob('/**')).not.toContain('/secret.txt');
    // Paths come back as the tenant's own.
    expect((await b.stat('/secret.txt')).path).toBe('/secret.txt');
    await b.remove();
    await expect(b.stat('/secret.txt')).rejects.toMatchObject({ code: 'not_found' });
  });

  it('lists its snapshots and volumes with their dates; a mounted volume cannot be deleted', async () => {
    const p = createMemoryProvider({ now: () => Date.UTC(2031, 5, 1) });
    const rid = (await p.spawn(spec('sb-cat'))).runtime_id;
    await p.writeFile(rid, '/workspace/f', Buffer.from('12345'), undefined);
    expect(await p.snapshot!(rid, 'snap')).toMatchObject({ image: 'memory-snapshot/snap', size_bytes: 5 });
    await expect(p.snapshot!(rid, 'snap')).rejects.toMatchObject({ code: 'conflict' });
    await p.createVolume!('vol');
    const user = (await p.spawn({ ...spec('sb-vol'), volumes: [{ name: 'vol', mount_path: '/data' }] })).runtime_id;
    await p.writeFile(user, '/data/x', Buffer.from('abc'), undefined);
    expect(await p.volumeSizes!(['vol', 'none'])).toEqual({ vol: 3, none: null });
    await expect(p.deleteVolume!('vol')).rejects.toMatchObject({ code: 'conflict' });
    expect(await p.listCatalog!()).toEqual({
      snapshots: [{ name: 'snap', image: 'memory-snapshot/snap', created_at: '2031-06-01T00:00:00.000Z' }],
      volumes: [{ name: 'vol', created_at: '2031-06-01T00:00:00.000Z' }],
    });
    await p.destroy(user);
    await p.deleteVolume!('vol');
    await p.deleteSnapshot!('snap', 'memory-snapshot/snap');
    expect(await p.listCatalog!()).toEqual({ snapshots: [], volumes: [] });
  });

  it('refuses a network it cannot give, a runtime id twice and a write through a dangling link', async () => {
    const p = createMemoryProvider();
    await expect(p.spawn({ ...spec('sb-net'), network: 'bridge' })).rejects.toMatchObject({ code: 'not_implemented' });
    const rid = (await p.spawn(spec('sb-twice'))).runtime_id;
    await expect(p.spawn(spec('sb-twice'))).rejects.toMatchObject({ code: 'conflict' });
    // As on the host-backed providers, a write never creates a dangling link's target.
    expect((await collect(p.exec(rid, sh('ln -s /workspace/nowhere dangling'), never))).exitCode).toBe(0);
    await expect(p.writeFile(rid, '/workspace/dangling', Buffer.from('x'), undefined)).rejects.toMatchObject({ code: 'bad_request' });
    await expect(p.stat(rid, '/workspace/nowhere')).rejects.toMatchObject({ code: 'not_found' });
  });
});
