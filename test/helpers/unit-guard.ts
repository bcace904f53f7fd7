/**
 * Setup file of the unit tier (DESIGN §6): a unit test may not start a child process or listen on
 * a port. Both fail the test at the call, naming what to do instead, so the tier stays fast and
 * a test that needs the world is moved to the integration tier on purpose.
 */
import { createRequire, syncBuiltinESMExports } from 'node:module';
import { Server } from 'node:net';

const require = createRequire(import.meta.url);
const cp = require('node:child_process') as Record<string, unknown>;

const refuse = (what: string) => () => {
  throw new Error(
    `the unit tier starts no child process and opens no port (${what}); put this test in the integration tier (vitest.config.ts)`,
  );
};

for (const fn of ['spawn', 'spawnSync', 'exec', 'execSync', 'execFile', 'execFileSync', 'fork']) cp[fn] = refuse(`child_process.${fn}`);
syncBuiltinESMExports();
Server.prototype.listen = refuse('net.Server.listen') as never;
