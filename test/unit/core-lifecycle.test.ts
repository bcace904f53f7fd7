/**
 * Core with a fake clock and fake ids (the Clock and IdSource ports): admission decisions, the
 * sandbox lifecycle (spawn, get, extend, expiry, prune, destroy) and exec, on the in-memory SQLite
 * store and the in-memory provider. Time moves only when the test moves it.
 */
import { RuntimeLocator } from '../../src/core/scheduler/locator.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { createSqliteStore } from '../../src/adapters/stores/sqlite/index.js';
import { Admission } from '../../src/core/admission/admission.js';
import { SbxError } from '../../src/core/errors.js';
import { EventBus } from '../../src/core/events/bus.js';
import type { SbxEvent } from '../../src/core/events/kinds.js';
import type { Clock, IdSource, Store } from '../../src/core/ports/index.js';
import { ProviderRegistry } from '../../src/core/providers/registry.js';
import { ANONYMOUS } from '../../src/core/sandboxes/caller.js';
import { ExecService } from '../../src/core/sandboxes/exec.js';
import { SandboxService } from '../../src/core/sandboxes/service.js';
import type { CoreSettings } from '../../src/core/settings.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

class FakeClock implements Clock {
  constructor(private ms: number) {}
  now(): Date {
    return new Date(this.ms);
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

class FakeIds implements IdSource {
  private n = 0;
  sandboxId(): string {
    return `sb-test${String(++this.n).padStart(4, '0')}`;
  }
  randomId(): string {
    return `rid-${++this.n}`;
  }
}

function settingsWith(d: Partial<CoreSettings['defaults']> = {}): CoreSettings {
  return {
    version: 'test',
    worker_id: 'local',
    hostname: 'h',
    preview_domain: '',
    default_provider: 'memory',
    defaults: {
      image: 'img',
      memory_mb: 256,
      vcpus: 1,
      ttl_ms: 60_000,
      max_ttl_ms: 3_600_000,
      default_exec_timeout_ms: 0,
      max_exec_timeout_ms: 600_000,
      max_sandboxes: 0,
      max_sandboxes_per_owner: 0,
      spawn_overflow: 'reject',
      spawn_queue_timeout_ms: 2_000,
      max_spawn_queue: 10,
      ...d,
    },
    limits: { max_file_bytes: 1 << 20, max_exec_output_bytes: 1 << 20 },
    enforce_ownership: false,
    pool: { enabled: false, max_vms: 4, max_users_per_vm: 8, image: 'img', memory_mb: 64, vcpus: 1, provider: 'memory' },
  };
}

let root: string;
let store: Store;
let clock: FakeClock;
let events: SbxEvent[];
let admission: Admission | undefined;

beforeEach(async () => {
  root = mkdtempSync(join(tmpdir(), 'sbx-core-unit-'));
  store = await createSqliteStore({ path: ':memory:' });
  await store.migrate();
  clock = new FakeClock(T0);
  events = [];
});

afterEach(async () => {
  admission?.close();
  admission = undefined;
  await store.close();
  rmSync(root, { recursive: true, force: true });
});

function core(d: Partial<CoreSettings['defaults']> = {}) {
  const settings = settingsWith(d);
  const bus = new EventBus(clock);
  bus.subscribe((e) => events.push(e));
  const providers = new ProviderRegistry(clock, 'memory');
  providers.register(createMemoryProvider());
  admission = new Admission(store, settings, clock, bus);
  const locator = new RuntimeLocator({ store, providers, clock, workerId: settings.worker_id, localWorker: true });
  const sandboxes = new SandboxService({ store, providers, locator, admission, bus, clock, ids: new FakeIds(), settings });
  return { sandboxes, admission, exec: new ExecService(sandboxes) };
}

async function rejection(p: Promise<unknown>): Promise<SbxError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SbxError);
  return err as SbxError;
}

describe('sandbox lifecycle on a fake clock', () => {
  it('spawns with the id from IdSource and times from the Clock', async () => {
    const { sandboxes } = core();
    const rec = await sandboxes.spawn({ ttl: '10m', metadata: { team: 'a' } });
    expect(rec.id).toBe('sb-test0001');
    expect(rec.state).toBe('running');
    expect(rec.provider).toBe('memory');
    expect(rec.created_at).toBe('2030-01-01T00:00:00.000Z');
    expect(rec.expires_at).toBe('2030-01-01T00:10:00.000Z');
    expect((await sandboxes.get(rec.id, ANONYMOUS)).metadata).toEqual({ team: 'a' });
    expect(events.filter((e) => e.sandbox_id === rec.id).map((e) => e.type)).toContain('sandbox.created');
    expect(events.every((e) => e.timestamp === '2030-01-01T00:00:00.000Z')).toBe(true);
  });

  it('extends from the current time, expires at once when the clock passes expires_at, and prune tears it down', async () => {
    const { sandboxes } = core();
    const rec = await sandboxes.spawn({ ttl: '1m' });
    clock.advance(30_000);
    const extended = await sandboxes.extend(rec.id, '2m', ANONYMOUS);
    expect(extended.expires_at).toBe('2030-01-01T00:02:30.000Z');
    expect(extended.updated_at).toBe('2030-01-01T00:00:30.000Z');

    clock.advance(119_999);
    expect((await sandboxes.get(rec.id, ANONYMOUS)).id).toBe(rec.id);
    clock.advance(1);
    expect((await rejection(sandboxes.get(rec.id, ANONYMOUS))).code).toBe('not_found');
    expect(await sandboxes.list(ANONYMOUS)).toEqual([]);
    expect((await rejection(sandboxes.extend(rec.id, '1m', ANONYMOUS))).code).toBe('not_found');

    expect(await sandboxes.prune(ANONYMOUS)).toBe(1);
    expect((await store.getSandbox(rec.id))?.state).toBe('destroyed');
    expect((await store.getSandbox(rec.id))?.updated_at).toBe('2030-01-01T00:02:30.000Z');
    const destroyed = events.find((e) => e.type === 'sandbox.destroyed' && e.sandbox_id === rec.id);
    expect(destroyed?.data).toEqual({ reason: 'expired' });
  });

  it('destroy is idempotent for a destroyed sandbox and not_found for an unknown id', async () => {
    const { sandboxes } = core();
    const rec = await sandboxes.spawn({});
    await sandboxes.destroy(rec.id, ANONYMOUS);
    await sandboxes.destroy(rec.id, ANONYMOUS);
    expect(events.filter((e) => e.type === 'sandbox.destroyed' && e.sandbox_id === rec.id)).toHaveLength(1);
    expect((await rejection(sandboxes.destroy('sb-nope', ANONYMOUS))).code).toBe('not_found');
    expect((await rejection(sandboxes.get(rec.id, ANONYMOUS))).code).toBe('not_found');
  });
});

describe('admission on a fake clock', () => {
  it('rejects past the global cap with unavailable and frees the slot on destroy', async () => {
    const { sandboxes } = core({ max_sandboxes: 1 });
    const first = await sandboxes.spawn({});
    const denied = await rejection(sandboxes.spawn({}));
    expect(denied.code).toBe('unavailable');
    await sandboxes.destroy(first.id, ANONYMOUS);
    expect((await sandboxes.spawn({})).id).toBe('sb-test0002');
  });

  it('applies the per-owner cap and the TTL maximum as resource_limit', async () => {
    const { sandboxes, admission: adm } = core({ max_sandboxes_per_owner: 1, max_ttl_ms: 3_600_000 });
    await sandboxes.spawn({ owner_id: 'alice' });
    expect((await rejection(sandboxes.spawn({ owner_id: 'alice' }))).code).toBe('resource_limit');
    expect((await sandboxes.spawn({ owner_id: 'bob' })).owner_id).toBe('bob');
    const ttl = await rejection(sandboxes.spawn({ owner_id: 'carol', ttl: '2h' }));
    expect(ttl.code).toBe('resource_limit');
    const decision = await adm.decide({ owner_id: 'alice', ttl_ms: 60_000 });
    expect(decision.allowed).toBe(false);
    expect(decision.reason).toBe('max_sandboxes_per_owner');
  });

  it('counts an expired sandbox as gone once the clock passes its expiry', async () => {
    const { sandboxes, admission: adm } = core({ max_sandboxes: 1 });
    await sandboxes.spawn({ ttl: '1m' });
    expect((await adm.decide({ owner_id: null, ttl_ms: 60_000 })).allowed).toBe(false);
    clock.advance(60_000);
    expect((await adm.decide({ owner_id: null, ttl_ms: 60_000 })).allowed).toBe(true);
  });
});

describe('exec through core', () => {
  it('runs a command and reports its exit code and output; an unknown sandbox is not_found', async () => {
    const { sandboxes, exec } = core();
    const rec = await sandboxes.spawn({});
    const r = await exec.run(rec.id, { command: 'echo hi; echo oops >&2; exit 3' }, ANONYMOUS);
    expect(r.exit_code).toBe(3);
    expect(new TextDecoder().decode(r.stdout)).toBe('hi\n');
    expect(new TextDecoder().decode(r.stderr)).toBe('oops\n');
    expect(r.timed_out).toBe(false);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['exec.started', 'exec.completed']));
    expect((await rejection(exec.run('sb-missing', { command: 'true' }, ANONYMOUS))).code).toBe('not_found');
  });

  it('refuses a timeout above the maximum before anything runs', async () => {
    const { sandboxes, exec } = core({ max_exec_timeout_ms: 1_000 });
    const rec = await sandboxes.spawn({});
    const before = events.length;
    expect((await rejection(exec.run(rec.id, { command: 'true', timeout: '5s' }, ANONYMOUS))).code).toBe('resource_limit');
    expect(events.slice(before).some((e) => e.type === 'exec.started')).toBe(false);
  });
});
