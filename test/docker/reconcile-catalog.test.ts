/**
 * Startup reconciliation of docker snapshots and volumes: labelled leftovers without a record go,
 * records of vanished ones are reported.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { Provider, Store } from '../../src/core/ports/index.js';
import { reconcileCatalog } from '../../src/core/sandboxes/reconcile-catalog.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE, testInstallationId, testProvider } from './engine.js';

const clock = { now: () => new Date() };

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('reconciliation of docker snapshots and volumes'), () => {
  let docker: Docker;
  let dir: string;
  let store: Store;
  let p: Provider;
  const installationId = testInstallationId();
  const other = testInstallationId();

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-rc-cat-'));
    store = await createSqliteStore({ path: join(dir, 'sbx.db') });
    await store.migrate();
    p = testProvider(installationId);
  });
  afterAll(async () => {
    for (const v of ['orphan', 'kept', 'theirs'])
      await docker
        .getVolume(`sbx-vol-rc-${v}-${installationId}`)
        .remove()
        .catch(() => undefined);
    await docker
      .getImage(`sbx-snapshot/rc-orphan-${installationId}:latest`)
      .remove({ force: true })
      .catch(() => undefined);
    await removeInstallation(docker, installationId);
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('removes labelled leftovers past the grace, keeps recorded and foreign ones, reports missing ones', async () => {
    const n = (s: string) => `rc-${s}-${installationId}`;
    await p.createVolume!(n('orphan'));
    await p.createVolume!(n('kept'));
    await store.insertVolume({ name: n('kept'), provider: 'docker', created_at: new Date().toISOString(), owner_id: null });
    await store.insertVolume({ name: n('gone'), provider: 'docker', created_at: new Date().toISOString(), owner_id: null });
    // Another installation's volume of a similar name is never touched.
    await testProvider(other).createVolume!(n('theirs'));
    const { runtime_id } = await p.spawn({
      sandbox_id: `sb-rc${installationId.slice(0, 8)}`,
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    });
    const snap = await p.snapshot!(runtime_id, n('orphan'));
    const bus = new EventBus(clock);
    const young = await reconcileCatalog({ store, providers: new Map([['docker', p]]), bus, clock, workerId: 'local' });
    expect(young.map((a) => a.action)).toEqual(['volume_missing']);
    const actions = await reconcileCatalog({ store, providers: new Map([['docker', p]]), bus, clock, workerId: 'local', graceMs: -1 });
    expect(actions.map((a) => `${a.action} ${a.runtime_id}`).sort()).toEqual(
      [`remove_orphan_snapshot ${n('orphan')}`, `remove_orphan_volume ${n('orphan')}`, `volume_missing ${n('gone')}`].sort(),
    );
    await expect(docker.getVolume(`sbx-vol-${n('orphan')}`).inspect()).rejects.toThrow();
    await expect(docker.getImage(snap.image).inspect()).rejects.toThrow();
    expect((await docker.getVolume(`sbx-vol-${n('kept')}`).inspect()).Name).toBe(`sbx-vol-${n('kept')}`);
    expect((await docker.getVolume(`sbx-vol-${n('theirs')}`).inspect()).Name).toBe(`sbx-vol-${n('theirs')}`);
  }, 120_000);
});
