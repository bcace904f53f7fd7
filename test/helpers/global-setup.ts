import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sweepProotLoaders } from '../../src/adapters/providers/proot/loaders.js';

/** One temp directory for the whole run, shared by the projects (each runs this global setup). */
const RUN = Symbol.for('sbx.test.run-tmp');
interface RunTmp {
  dir: string;
  users: number;
}

/**
 * Once per run: says which optional suites skip, and gives the run a temp directory of its own.
 * Every test process (and what it spawns with the inherited environment) sees it as os.tmpdir();
 * the teardown names anything a test left there, then removes it, so a run leaves nothing in the
 * system temp directory. The tests clean up after themselves (test/helpers/tmp.ts); this is the net.
 * Each project runs this setup; the first makes the directory and the last to finish removes it.
 */
export default function setup(): () => Promise<void> {
  const g = globalThis as { [RUN]?: RunTmp };
  if (!g[RUN]) {
    announceSkips();
    g[RUN] = { dir: mkdtempSync(join(tmpdir(), 'sbx-vitest-')), users: 0 };
    process.env.TMPDIR = g[RUN].dir;
  }
  const run = g[RUN];
  run.users++;
  const runTmp = run.dir;
  return async () => {
    // The last project to finish cleans up: another may still have tests using the directory.
    if (--run.users > 0) return;
    g[RUN] = undefined;
    // proot writes its loader to /tmp whatever TMPDIR says; killed execs leave theirs behind.
    await sweepProotLoaders(0).catch(() => 0);
    let left: string[] = [];
    try {
      left = readdirSync(runTmp);
    } catch {
      return;
    }
    if (left.length > 0)
      process.stderr.write(`sbx tests: left in the temp directory, now removed (a test that does not clean up): ${left.join(', ')}\n`);
    rmSync(runTmp, { recursive: true, force: true });
  };
}

/**
 * Vitest's default reporter shows a skipped file's count, not the reason in its suite title, so the
 * reason is said here. `.ci/run` sets every flag.
 */
function announceSkips(): void {
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
