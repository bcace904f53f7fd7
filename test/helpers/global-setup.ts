/**
 * Says once per run which optional suites skip, and how to run them: vitest's default reporter
 * shows a skipped file's count, not the reason in its suite title. `.ci/run` sets every flag.
 */
export default function announceSkips(): void {
  const suites: Array<[string, boolean, string]> = [
    ['docker', process.env.SBX_TEST_DOCKER === '1', 'SBX_TEST_DOCKER=1 with an engine and the test image (bash scripts/test-docker-up.sh)'],
    ['postgres', Boolean(process.env.SBX_TEST_POSTGRES_DSN), 'SBX_TEST_POSTGRES_DSN=$(bash scripts/test-postgres-up.sh)'],
    ['proot', process.env.SBX_TEST_PROOT === '1', 'SBX_TEST_PROOT=1 with proot and busybox-static installed'],
    ['npm pack', process.env.SBX_TEST_PACK === '1', 'SBX_TEST_PACK=1 (needs the npm registry or a warm cache)'],
  ];
  for (const [name, on, how] of suites) {
    if (!on) process.stderr.write(`sbx tests: the ${name} suites skip; to run them set ${how}\n`);
  }
}
