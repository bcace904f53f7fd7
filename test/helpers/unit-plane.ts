/**
 * The unit tier's control plane (DESIGN §6): the whole app of `sbx serve`, built by
 * createControlPlane, with the in-memory provider, an in-memory SQLite store and no listener —
 * requests go through fastify's `inject`. Test files fake the timers first (`fakeClock()`), so the
 * plane's intervals, TTLs and exec deadlines move only when the test moves them. Nothing here
 * starts a process or opens a port.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { InjectOptions } from 'fastify';
import { pino } from 'pino';
import { vi } from 'vitest';
import { createMemoryProvider } from '../../src/adapters/providers/memory/index.js';
import { createControlPlane, type ControlPlane } from '../../src/compose/control-plane.js';
import { loadConfig } from '../../src/config/index.js';
import type { Provider } from '../../src/core/ports/index.js';

/**
 * Fakes the timers, Date and performance.now (the stopwatch of periodic tasks), not nextTick,
 * setImmediate or queueMicrotask, which fastify's inject needs.
 */
export function fakeClock(start = Date.UTC(2030, 0, 1)): void {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'], now: start });
}

/**
 * Moves the fake clock in steps until `pending` settles (a request whose deadline timer is set
 * only once it has got that far), at most `maxMs` of fake time; then returns its result.
 */
export async function advanceUntil<T>(pending: Promise<T>, maxMs: number, stepMs = 100): Promise<T> {
  let settled = false;
  const watched = pending.finally(() => (settled = true));
  for (let spent = 0; !settled && spent < maxMs; spent += stepMs) await vi.advanceTimersByTimeAsync(stepMs);
  return watched;
}

export interface UnitRes<T = any> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  text: string;
}

export interface UnitPlane {
  plane: ControlPlane;
  provider: Provider;
  /** One request through `app.inject`; a JSON body is sent as JSON, the answer parsed when it is JSON. */
  req<T = any>(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<UnitRes<T>>;
  inject(opts: InjectOptions): Promise<import('light-my-request').Response>;
  close(): Promise<void>;
}

function merge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object'
        ? merge(out[k] as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** A control plane over the in-memory provider and `:memory:` SQLite; `overrides` is config (as in sbx.yaml). */
export async function startUnitPlane(overrides: Record<string, unknown> = {}): Promise<UnitPlane> {
  // Config files are looked up here (none), and background-process output would be kept here.
  const dir = mkdtempSync(join(tmpdir(), 'sbx-unit-'));
  const base = {
    database: { driver: 'sqlite', path: ':memory:' },
    providers: { default: 'auto', docker: { enabled: false }, proot: { enabled: false } },
    logging: { level: 'silent' },
  };
  let plane: ControlPlane | undefined;
  try {
    const { config } = await loadConfig({ cwd: dir, home: dir, env: {}, overrides: merge(base, overrides) as never });
    const provider = createMemoryProvider();
    plane = await createControlPlane(config, {
      logger: pino({ level: 'silent' }),
      home: dir,
      providers: { providers: [provider], defaultName: provider.name },
    });
    const app = plane.app;
    const started = plane;
    return {
      plane,
      provider,
      inject: (opts) => app.inject(opts),
      async req(method, url, body, headers = {}) {
        const h: Record<string, string> = { ...headers };
        let payload: string | undefined;
        if (body !== undefined) {
          payload = typeof body === 'string' ? body : JSON.stringify(body);
          h['content-type'] ??= 'application/json';
        }
        const res = await app.inject({ method: method as never, url, headers: h, ...(payload !== undefined ? { payload } : {}) });
        let parsed: unknown = res.body;
        if (String(res.headers['content-type'] ?? '').includes('json')) {
          try {
            parsed = JSON.parse(res.body);
          } catch {
            parsed = res.body;
          }
        }
        return { status: res.statusCode, headers: res.headers, body: parsed as never, text: res.body };
      },
      async close() {
        await started.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await plane?.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
