import { existsSync } from 'node:fs';
import { defaultAgentBinary } from '../../src/adapters/providers/docker/options.js';

/** The built agent; the agent suites are mandatory with docker, so a missing build fails loudly. */
export function requireAgentBinary(): string {
  const bin = defaultAgentBinary();
  if (!bin || !existsSync(bin))
    throw new Error('sbx-agent is not built: run npm run build (needs gcc or cc with a static libc, Debian: build-essential)');
  return bin;
}
