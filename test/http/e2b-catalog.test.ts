import { Sandbox, Volume, VolumeError } from 'e2b';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envdSdkFor, type EnvdSdk } from '../helpers/e2b-sdk.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * E2B's snapshots and `Volume` over sbx's snapshots and volumes (DESIGN.md §10, §14), driven by E2B's
 * own SDK against a real server on a real port (mock provider, which snapshots and mounts volumes).
 */
const KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

describe('E2B snapshots and volumes', () => {
  let srv: TestServer;
  let sdk: EnvdSdk;
  const requested: string[] = [];
  const native = async (method: string, path: string) => call(srv.url, method, path, undefined, { 'x-api-key': KEY });

  beforeAll(async () => {
    srv = await startTestServer();
    sdk = envdSdkFor(srv.url, requested, KEY);
  });
  afterAll(async () => {
    await srv?.close();
    expect(requested.length).toBeGreaterThan(5);
    for (const url of requested) expect(url.startsWith(`${srv.url}/e2b`)).toBe(true);
  });

  it('createSnapshot → a sandbox created from it has the files; listSnapshots filters; deleteSnapshot', async () => {
    const sbx = await Sandbox.create({ ...sdk });
    await sbx.files.write('/workspace/kept.txt', 'written before the snapshot');
    const snap = await sbx.createSnapshot({ name: 'e2b-snap-1' });
    expect(snap).toEqual({ snapshotId: 'e2b-snap-1', names: ['e2b-snap-1'] });
    await sbx.files.write('/workspace/later.txt', 'written after');
    // The native API sees it, taken of that sandbox.
    const nat = await native('GET', '/api/v1/snapshots/e2b-snap-1');
    expect(nat.status).toBe(200);
    expect(nat.body).toMatchObject({ name: 'e2b-snap-1', provider: 'mock' });
    // Unnamed: sbx names it.
    const unnamed = await sbx.createSnapshot();
    expect(unnamed.snapshotId).toMatch(/^snapshot-[0-9a-f]{12}$/);

    const other = await Sandbox.create({ ...sdk });
    await other.createSnapshot({ name: 'e2b-snap-other' });

    const all: string[] = [];
    const pager = Sandbox.listSnapshots({ ...sdk, limit: 1 });
    while (pager.hasNext) all.push(...(await pager.nextItems()).map((s) => s.snapshotId));
    expect(all).toEqual(['e2b-snap-1', 'e2b-snap-other', unnamed.snapshotId].sort());
    const mine = await sbx.listSnapshots().nextItems();
    expect(mine.map((s) => s.snapshotId).sort()).toEqual(['e2b-snap-1', unnamed.snapshotId].sort());

    const fromSnap = await Sandbox.create('e2b-snap-1', { ...sdk });
    expect(await fromSnap.files.read('/workspace/kept.txt')).toBe('written before the snapshot');
    expect(await fromSnap.files.exists('/workspace/later.txt')).toBe(false);
    expect((await native('GET', `/api/v1/sandboxes/${fromSnap.sandboxId}`)).body.snapshot).toBe('e2b-snap-1');

    // A bad name is E2B's 400; a taken one its 409; a missing sandbox its not-found error.
    await expect(sbx.createSnapshot({ name: 'Bad Name!' })).rejects.toThrow(/snapshot/);
    await expect(sbx.createSnapshot({ name: 'e2b-snap-1' })).rejects.toThrow(/already exists/);
    await expect(Sandbox.createSnapshot('missing-sandbox', { ...sdk })).rejects.toThrow(/not found/);

    expect(await Sandbox.deleteSnapshot('e2b-snap-other', sdk)).toBe(true);
    expect(await Sandbox.deleteSnapshot('e2b-snap-other', sdk)).toBe(false);
    expect((await native('GET', '/api/v1/snapshots/e2b-snap-other')).status).toBe(404);
    // A missing template/snapshot name at create is E2B's not-found.
    await expect(Sandbox.create('e2b-snap-other', { ...sdk })).rejects.toThrow(/not found/);
    for (const s of [sbx, other, fromSnap]) await s.kill();
  });

  it('Volume create/getInfo/list/destroy; a sandbox mounts it by volumeMounts and the files outlive it', async () => {
    const vol = await Volume.create('e2b-vol-1', sdk);
    expect(vol.volumeId).toBe('e2b-vol-1');
    expect(vol.name).toBe('e2b-vol-1');
    // The volume content API's host is this server's domain, never E2B's public one.
    expect(vol.domain).toBe(sdk.domain);
    expect(await Volume.getInfo('e2b-vol-1', sdk)).toMatchObject({ volumeId: 'e2b-vol-1', name: 'e2b-vol-1' });
    expect((await Volume.list(sdk)).map((v) => v.name)).toEqual(['e2b-vol-1']);
    expect((await native('GET', '/api/v1/volumes')).body).toEqual([expect.objectContaining({ name: 'e2b-vol-1', provider: 'mock' })]);

    const first = await Sandbox.create({ ...sdk, volumeMounts: { '/data': vol } });
    expect((await Sandbox.getInfo(first.sandboxId, sdk)).volumeMounts).toEqual([{ name: 'e2b-vol-1', path: '/data' }]);
    await first.files.write('/data/shared.txt', 'on the volume');
    // Mounted: destroy is refused (E2B's 409 surfaces as a VolumeError).
    await expect(Volume.destroy('e2b-vol-1', sdk)).rejects.toBeInstanceOf(VolumeError);
    await first.kill();
    const second = await Sandbox.create({ ...sdk, volumeMounts: { '/mnt/v': 'e2b-vol-1' } });
    expect(await second.files.read('/mnt/v/shared.txt')).toBe('on the volume');
    await second.kill();

    await expect(Sandbox.create({ ...sdk, volumeMounts: { '/data': 'no-such-volume' } })).rejects.toThrow(/not found/);
    expect(await Volume.destroy('e2b-vol-1', sdk)).toBe(true);
    expect(await Volume.destroy('e2b-vol-1', sdk)).toBe(false);
    // Volume content (files of a volume without a sandbox) is not served: 501.
    const content = await fetch(`${srv.url}/e2b/volumecontent/e2b-vol-1/dir?path=/`, { headers: { 'x-api-key': KEY } });
    expect(content.status).toBe(501);
    expect(await content.json()).toEqual({ code: 501, message: expect.stringMatching(/volume content/) });
  });
});
