import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Three tiers (DESIGN §6), one vitest project each; `npm test` runs them all, `npm run test:unit`
 * the first alone.
 * - unit: no child process, no port, no sleep — core, contracts, the in-memory provider's
 *   contract and the HTTP app through `app.inject` on fake timers. Seconds, the inner loop.
 * - integration: real servers on real ports, SQLite files, mock and proot processes, the CLI and
 *   the built package (dist/ is built once per run by build-setup when stale).
 * - system: docker, PostgreSQL, browsers, network namespaces; each suite skips unless its flag is set.
 * A new test file is integration unless it is listed for unit or system here.
 */
const UNIT = ['test/unit/**/*.test.ts', 'test/contract/provider-memory.test.ts', 'test/contract/store-sqlite-contract.test.ts'];

/** Files under test/unit that start processes, open ports or sleep: integration until they are rewritten. */
const NOT_UNIT = [
  'test/unit/browser-client-graph.test.ts',
  'test/unit/docker-agent-conn.test.ts',
  'test/unit/egress-gateway.test.ts',
  'test/unit/egress-hosts.test.ts',
  'test/unit/egress-relay.test.ts',
  'test/unit/firecracker-client.test.ts',
  'test/unit/firecracker-launcher.test.ts',
  'test/unit/firecracker-provider.test.ts',
  'test/unit/firecracker-rootfs.test.ts',
  'test/unit/host-fs-paths.test.ts',
  'test/unit/host-fs-race.test.ts',
  'test/unit/host-isolation.test.ts',
  'test/unit/host-reconcile.test.ts',
  'test/unit/hosted-provider.test.ts',
  'test/unit/proot-loaders.test.ts',
  'test/unit/provider-catalogue.test.ts',
  'test/unit/provider-shared.test.ts',
];

/** The unit tier's files by name (the integration tier excludes exactly these). */
const UNIT_FILES = readdirSync(join(import.meta.dirname, 'test', 'unit'), { recursive: true })
  .map((f) => `test/unit/${String(f)}`)
  .filter((f) => f.endsWith('.test.ts') && !NOT_UNIT.includes(f))
  .concat('test/contract/provider-memory.test.ts', 'test/contract/store-sqlite-contract.test.ts');

const SYSTEM = [
  'test/docker/**/*.test.ts',
  'test/multihost/**/*.test.ts',
  'test/replicas/**/*.test.ts',
  'test/contract/provider-docker*.test.ts',
  'test/contract/provider-firecracker-live.test.ts',
  'test/contract/provider-hosted-live.test.ts',
  'test/contract/store-postgres.test.ts',
  'test/http/integer-bounds-postgres.test.ts',
  'test/http/replicas-shared.test.ts',
  'test/http/scale.test.ts',
  'test/e2e/browser-guard.test.ts',
  'test/e2e/dashboard.test.ts',
  'test/processes/processes-docker.test.ts',
  'test/warm/warm-docker.test.ts',
];

const ALWAYS_EXCLUDED = ['test/reliability/**', ...configDefaults.exclude];

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: UNIT,
          exclude: [...NOT_UNIT, ...ALWAYS_EXCLUDED],
          globalSetup: ['test/helpers/global-setup.ts'],
          // A child process or a listening socket fails the test that asks for one.
          setupFiles: ['test/helpers/unit-guard.ts'],
          // Files share a worker's module cache (half the CPU of importing the app per file); they
          // restore real timers and mock no module, so one cannot leak into the next.
          isolate: false,
          // Nothing here waits on the world: a slow test is a bug, not a slow machine.
          testTimeout: 10_000,
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/**/*.test.ts'],
          exclude: [...UNIT_FILES, ...SYSTEM, ...ALWAYS_EXCLUDED],
          globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/build-setup.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'system',
          include: SYSTEM,
          exclude: ALWAYS_EXCLUDED,
          globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/build-setup.ts'],
        },
      },
    ],
  },
});
