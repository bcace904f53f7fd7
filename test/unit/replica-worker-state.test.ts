/**
 * A replica's worker state (DESIGN §7): read from the shared store before each call, only its own
 * worker's live records, fenced by the stored lease; and the label its providers put on what they make.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { replicaWorkerState } from '../../src/adapters/stores/worker-state/replica.js';
import { runtimeLabel } from '../../src/compose/replicas.js';
import type { SandboxRecord, Store } from '../../src/core/ports/index.js';

let store: Store;
beforeEach(async () => {
  store = await createSqliteStore({ path: ':memory:' });
  await store.migrate();
});
afterEach(async () => store.close());

function record(id: string, worker: string, state: SandboxRecord['state'] = 'running'): SandboxRecord {
  const now = new Date();
  return {
    id,
    state,
    provider: 'mock',
    image: 'img',
    memory_mb: 1,
    vcpus: 1,
    created_at: now.toISOString(),
    updated_at: now.toISOString(),
    expires_at: new Date(now.getTime() + 600_000).toISOString(),
    metadata: {},
    owner_id: null,
    worker_id: worker,
    runtime_id: `rt-${id}`,
    template: null,
  };
}

describe('replica worker state', () => {
  it("knows only its own worker's live runtimes, as the store has them", async () => {
    const st = replicaWorkerState(store, 'ra');
    await store.insertSandbox(record('sb-mine', 'ra'));
    await store.insertSandbox(record('sb-other', 'rb'));
    await store.insertSandbox(record('sb-gone', 'ra', 'destroyed'));
    for (const id of ['sb-mine', 'sb-other', 'sb-gone', 'sb-none']) await st.load(id);
    expect(st.getRuntime('sb-mine')).toMatchObject({ sandbox_id: 'sb-mine', provider: 'mock', runtime_id: 'rt-sb-mine' });
    expect(st.getRuntime('sb-other')).toBeNull();
    expect(st.getRuntime('sb-gone')).toBeNull();
    expect(st.getRuntime('sb-none')).toBeNull();
    // A spawn served for another replica is known before its caller stores the row.
    st.putRuntime({ sandbox_id: 'sb-new', provider: 'mock', runtime_id: 'rt-new' });
    await st.load('sb-new');
    expect(st.getRuntime('sb-new')?.runtime_id).toBe('rt-new');
    // Destroyed elsewhere: the next load forgets it.
    await store.updateSandbox('sb-mine', { state: 'destroyed', updated_at: new Date().toISOString() });
    await st.load('sb-mine');
    expect(st.getRuntime('sb-mine')).toBeNull();
  });

  it('fences with the stored lease: an older generation than the store has is refused', async () => {
    const st = replicaWorkerState(store, 'ra');
    await store.insertSandbox(record('sb-1', 'ra'));
    const first = (await store.acquireLease('sb-1', 'ra', 60_000, new Date()))!;
    const second = (await store.acquireLease('sb-1', 'ra', 60_000, new Date()))!;
    expect(second.generation).toBeGreaterThan(first.generation);
    await st.load('sb-1');
    expect(st.observeGeneration('sb-1', first.generation)).toBe(false);
    expect(st.observeGeneration('sb-1', second.generation)).toBe(true);
    // Another holder's lease sets no floor for this worker.
    await store.insertSandbox(record('sb-2', 'ra'));
    await store.acquireLease('sb-2', 'rb', 60_000, new Date());
    await st.load('sb-2');
    expect(st.generation('sb-2')).toBeNull();
  });

  it('labels: the installation id alone for `local`, with the worker id for a replica (short, docker-safe)', () => {
    expect(runtimeLabel('abcd1234', 'local')).toBe('abcd1234');
    expect(runtimeLabel('abcd1234', 'ra')).toBe('abcd1234.ra');
    const long = runtimeLabel('abcd1234', 'host-with-a-long-name.example.com:7423');
    expect(long).toMatch(/^abcd1234\.[0-9a-f]{15}$/);
    expect(long).not.toBe(runtimeLabel('abcd1234', 'host-with-a-long-name.example.com:7424'));
    // Two replicas whose ids differ only at the end still get two networks (24 characters kept).
    const [a, b] = ['hostname-one:7423', 'hostname-one:7424'].map((id) => runtimeLabel('8c7c939f6adfce1b', id).slice(0, 24));
    expect(a).not.toBe(b);
    expect(runtimeLabel('abcd1234', 'ra')).not.toBe(runtimeLabel('abcd1234', 'rb'));
  });
});
