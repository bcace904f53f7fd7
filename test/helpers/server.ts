import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createControlPlane, type ControlPlane, type ControlPlaneOptions } from '../../src/compose/control-plane.js';
import { loadConfig, type SbxConfig } from '../../src/config/index.js';

export interface TestServer {
  url: string;
  plane: ControlPlane;
  dir: string;
  close(): Promise<void>;
}

/** `b` over `a`, objects merged key by key (config overrides). */
export function mergeOverrides(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    out[k] =
      v && typeof v === 'object' && !Array.isArray(v) && typeof out[k] === 'object'
        ? mergeOverrides(out[k] as Record<string, unknown>, v as Record<string, unknown>)
        : v;
  }
  return out;
}

/** Control-plane options for a test server (logger, ids, clock), or a function of its config. */
export type TestPlaneOptions = Omit<ControlPlaneOptions, 'home'> | ((config: SbxConfig) => Omit<ControlPlaneOptions, 'home'>);

/**
 * A real control plane on 127.0.0.1:0: mock provider (unless overridden), a temp SQLite file,
 * temp home and cwd so no developer config leaks in. The logger is silent unless `options` gives one.
 */
export async function startTestServer(overrides: Record<string, unknown> = {}, options: TestPlaneOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-test-'));
  const base = {
    server: { host: '127.0.0.1', port: 0 },
    database: { driver: 'sqlite', path: join(dir, 'sbx.db') },
    providers: { default: 'mock', mock: { root_dir: join(dir, 'mock') } },
    logging: { level: 'silent' },
  };
  let plane: ControlPlane | undefined;
  let url: string;
  try {
    const { config } = await loadConfig({ cwd: dir, home: dir, env: {}, overrides: mergeOverrides(base, overrides) as never });
    const opts = typeof options === 'function' ? options(config) : options;
    plane = await createControlPlane(config, { logger: pino({ level: 'silent' }), ...opts, home: dir });
    url = await plane.listen();
  } catch (err) {
    // A server that does not start (a test of a bad config) leaves no temp directory behind.
    await plane?.close().catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const started = plane;
  return {
    url,
    plane: started,
    dir,
    async close() {
      await started.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
