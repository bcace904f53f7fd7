import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { Provider, SandboxRecord, Store } from '../../src/core/ports/index.js';
import { reconcileSandboxes } from '../../src/core/sandboxes/reconcile.js';
import { DOCKER_SKIP, dockerTitle, removeInstallation, requireEngine, TEST_IMAGE, testInstallationId, testProvider } from './engine.js';

const clock = { now: () => new Date() };
const never = new AbortController().signal;
const iso = (offsetMs: number) => new Date(Date.now() + offsetMs).toISOString();

describe.skipIf(DOCKER_SKIP !== undefined)(dockerTitle('startup reconciliation against real containers'), () => {
  let docker: Docker;
  let dir: string;
  let store: Store;
  let p: Provider;
  const installationId = testInstallationId();
  const otherInstallation = testInstallationId();
  const strays: string[] = [];

  async function spawn(provider = p): Promise<{ id: string; rid: string }> {
    const id = `sb-rc${randomBytes(5).toString('hex')}`;
    const { runtime_id } = await provider.spawn({
      sandbox_id: id,
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      metadata: {},
      owner_id: null,
    });
    return { id, rid: runtime_id };
  }
  async function stored(id: string, rid: string | null, extra: Partial<SandboxRecord> = {}): Promise<void> {
    await store.insertSandbox({
      id,
      state: 'running',
      provider: 'docker',
      image: TEST_IMAGE,
      memory_mb: 64,
      vcpus: 1,
      created_at: iso(-60_000),
      updated_at: iso(-60_000),
      expires_at: iso(30 * 60_000),
      metadata: {},
      owner_id: null,
      worker_id: 'local',
      runtime_id: rid,
      template: null,
      ...extra,
    });
  }
  const exists = async (rid: string) => (await p.status(rid)) !== 'missing';

  beforeAll(async () => {
    docker = await requireEngine();
    dir = mkdtempSync(join(tmpdir(), 'sbx-reconcile-'));
    store = await createSqliteStore({ path: join(dir, 'sbx.db') });
    await store.migrate();
    p = testProvider(installationId);
  });
  afterAll(async () => {
    await removeInstallation(docker, installationId);
    await removeInstallation(docker, otherInstallation);
    for (const id of strays)
      await docker
        .getContainer(id)
        .remove({ force: true })
        .catch(() => undefined);
    await store?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('fixes the store, removes this installation’s orphans, leaves everything else alone', async () => {
    // 1. live record, container removed behind our back → destroyed
    const gone = await spawn();
    await stored(gone.id, gone.rid);
    await docker.getContainer(gone.rid).remove({ force: true });
    // 2. live record past its TTL, container alive → torn down, expired
    const old = await spawn();
    await stored(old.id, old.rid, { expires_at: iso(-1_000) });
    // 3. live record past its TTL, container gone → expired
    const oldGone = await spawn();
    await stored(oldGone.id, oldGone.rid, { expires_at: iso(-1_000) });
    await docker.getContainer(oldGone.rid).remove({ force: true });
    // 4. container with our label and no record → removed
    const orphan = await spawn();
    // 5. destroyed record whose container survived → removed
    const zombie = await spawn();
    await stored(zombie.id, zombie.rid, { state: 'destroyed' });
    // 6. healthy sandbox → untouched, keeps working
    const alive = await spawn();
    await stored(alive.id, alive.rid);
    // 7. stopped container (killed from outside) → torn down, destroyed; also from `error`
    const stopped = await spawn();
    await stored(stopped.id, stopped.rid);
    await docker.getContainer(stopped.rid).kill();
    const failed = await spawn();
    await stored(failed.id, failed.rid, { state: 'error' });
    await docker.getContainer(failed.rid).stop({ t: 0 });
    // 8. another worker's live sandbox with a container here: not this worker's to judge, not an orphan
    const remote = await spawn();
    await stored(remote.id, remote.rid, { worker_id: 'worker-b' });
    // 9. another installation's container, and an unlabelled one → never touched
    const foreign = await spawn(testProvider(otherInstallation));
    const plain = await docker.createContainer({ Image: TEST_IMAGE, Cmd: ['sleep', '600'], Labels: { 'sbx.sandbox_id': 'sb-notours' } });
    strays.push(plain.id);
    await plain.start();

    const bus = new EventBus(clock);
    const report = await reconcileSandboxes({ store, providers: new Map([['docker', p]]), bus, clock, installationId, workerId: 'local' });

    const byRuntime = new Map(report.actions.map((a) => [a.runtime_id, a]));
    expect(byRuntime.get(gone.rid)).toEqual({ action: 'mark_destroyed', sandbox_id: gone.id, runtime_id: gone.rid, provider: 'docker' });
    expect(byRuntime.get(old.rid)).toEqual({ action: 'expire', sandbox_id: old.id, runtime_id: old.rid, provider: 'docker' });
    expect(byRuntime.get(oldGone.rid)).toEqual({
      action: 'mark_expired',
      sandbox_id: oldGone.id,
      runtime_id: oldGone.rid,
      provider: 'docker',
    });
    expect(byRuntime.get(orphan.rid)).toEqual({
      action: 'remove_orphan',
      sandbox_id: orphan.id,
      runtime_id: orphan.rid,
      provider: 'docker',
    });
    expect(byRuntime.get(zombie.rid)).toEqual({
      action: 'remove_orphan',
      sandbox_id: zombie.id,
      runtime_id: zombie.rid,
      provider: 'docker',
    });
    expect(byRuntime.get(stopped.rid)).toEqual({
      action: 'destroy_stopped',
      sandbox_id: stopped.id,
      runtime_id: stopped.rid,
      provider: 'docker',
    });
    expect(byRuntime.get(failed.rid)).toEqual({
      action: 'destroy_stopped',
      sandbox_id: failed.id,
      runtime_id: failed.rid,
      provider: 'docker',
    });
    expect(report.actions).toHaveLength(7);

    expect((await store.getSandbox(gone.id))!.state).toBe('destroyed');
    expect((await store.getSandbox(old.id))!.state).toBe('expired');
    expect((await store.getSandbox(oldGone.id))!.state).toBe('expired');
    expect((await store.getSandbox(alive.id))!.state).toBe('running');
    expect((await store.getSandbox(stopped.id))!.state).toBe('destroyed');
    expect((await store.getSandbox(failed.id))!.state).toBe('destroyed');
    expect((await store.getSandbox(remote.id))!.state).toBe('running');

    expect(await exists(old.rid)).toBe(false);
    expect(await exists(orphan.rid)).toBe(false);
    expect(await exists(zombie.rid)).toBe(false);
    expect(await p.status(alive.rid)).toBe('running');
    expect(await exists(stopped.rid)).toBe(false);
    expect(await exists(failed.rid)).toBe(false);
    expect(await p.status(remote.rid)).toBe('running');
    expect(await p.status(foreign.rid)).toBe('running');
    expect((await docker.getContainer(plain.id).inspect()).State.Running).toBe(true);

    let out = '';
    for await (const ev of p.exec(alive.rid, { command: 'echo still here', args: [], mode: 'shell', env: {} }, never)) {
      if (ev.stream === 'stdout') out += Buffer.from(ev.data).toString();
    }
    expect(out).toBe('still here\n');

    const events = bus.recent({ types: ['reconcile.action'] });
    expect(events).toHaveLength(7);
    expect(events.find((e) => e.sandbox_id === gone.id)).toMatchObject({
      type: 'reconcile.action',
      worker_id: 'local',
      data: { action: 'mark_destroyed', provider: 'docker', runtime_id: gone.rid },
    });

    // A second pass finds nothing left to do.
    const again = await reconcileSandboxes({ store, providers: new Map([['docker', p]]), bus, clock, installationId, workerId: 'local' });
    expect(again.actions).toEqual([]);
  });

  it('judges nothing while the engine cannot answer: a stopped container survives until it can', async () => {
    const stopped = await spawn();
    await stored(stopped.id, stopped.rid);
    await docker.getContainer(stopped.rid).kill();
    const down = testProvider(installationId, { socketPath: join(dir, 'no-engine.sock') });
    const bus = new EventBus(clock);
    const blind = await reconcileSandboxes({
      store,
      providers: new Map([['docker', down]]),
      bus,
      clock,
      installationId,
      workerId: 'local',
    });
    expect(blind.actions).toEqual([]);
    expect((await store.getSandbox(stopped.id))!.state).toBe('running');
    expect(await p.status(stopped.rid)).toBe('stopped');

    const seeing = await reconcileSandboxes({ store, providers: new Map([['docker', p]]), bus, clock, installationId, workerId: 'local' });
    expect(seeing.actions).toEqual([{ action: 'destroy_stopped', sandbox_id: stopped.id, runtime_id: stopped.rid, provider: 'docker' }]);
    expect((await store.getSandbox(stopped.id))!.state).toBe('destroyed');
    expect(await exists(stopped.rid)).toBe(false);
  });
});
