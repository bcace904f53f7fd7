import { defineConfig } from 'vitest/config';

/** The reliability suite (issue 12): `npm run test:reliability`; `npm run reliability` also writes RELIABILITY.md. */
export default defineConfig({
  test: {
    include: ['test/reliability/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 120_000,
    hookTimeout: 120_000,
    pool: 'forks',
    fileParallelism: false,
    reporters: ['default'],
  },
});
