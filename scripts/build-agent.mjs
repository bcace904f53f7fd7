#!/usr/bin/env node
// Builds the in-sandbox agent (agent/*.c: sbx-agent.c and the firecracker guest mode, docs/agent.md)
// into dist/agent/sbx-agent-linux-<arch> with the machine's C compiler, static. Without a compiler (or off Linux) it says so and leaves any
// binary already there (the npm package ships one for linux x64): the docker provider then runs
// exec through the engine, as with providers.docker.agent: off.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const source = join(root, 'agent', 'sbx-agent.c');
const sources = existsSync(source)
  ? readdirSync(join(root, 'agent'))
      .filter((f) => f.endsWith('.c'))
      .sort()
      .map((f) => join(root, 'agent', f))
  : [];
const arch = process.arch === 'x64' ? 'x64' : process.arch;
const out = join(root, 'dist', 'agent', `sbx-agent-linux-${arch}`);

function note(why) {
  const kept = existsSync(out) ? ` (keeping the existing ${out})` : '';
  console.log(`sbx-agent: not built: ${why}${kept}; the docker provider falls back to the engine's exec API`);
}

if (process.platform !== 'linux') note(`this is ${process.platform}, the agent runs in Linux containers`);
else if (!existsSync(source)) note(`${source} is missing`);
else {
  const cc = [process.env.CC, 'gcc', 'cc'].find((c) => c && spawnSync(c, ['--version'], { stdio: 'ignore' }).status === 0);
  if (!cc) note('no C compiler (gcc or cc; Debian: apt-get install build-essential)');
  else {
    mkdirSync(dirname(out), { recursive: true });
    const tmp = `${out}.tmp`;
    const r = spawnSync(cc, ['-std=c99', '-static', '-O2', '-s', '-o', tmp, ...sources], { stdio: ['ignore', 'inherit', 'inherit'] });
    if (r.status !== 0) {
      rmSync(tmp, { force: true });
      note(`${cc} failed (a static build needs the C library's static archive, e.g. Debian's libc6-dev)`);
    } else {
      renameSync(tmp, out);
      console.log(`sbx-agent: built ${out}`);
    }
  }
}
