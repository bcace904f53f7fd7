/**
 * File watch of host-directory runtimes (mock, proot; DESIGN §16): the static sbx-agent in its
 * host mode (`sbx-agent --watch ROOT PATH`, agent/watch.c) over the sandbox root — inotify with
 * IN_DONT_FOLLOW on names looked up in O_NOFOLLOW-walked parents, which Node has no binding for.
 * Paths come back relative to the root and never outside it; no symlink is ever followed. The
 * frames (`[u32 LE len]` + a payload) carry the docker agent's watch payloads (watch-decoder.ts).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { SbxError } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';
import { sbxPackage } from '../../../package-root.js';
import { frameSplitter, WatchStream } from './watch-decoder.js';

/** The agent binary the package build made, for this machine's architecture; undefined when not built. */
export function hostAgentBinary(): string | undefined {
  const path = join(sbxPackage().root, 'dist', 'agent', `sbx-agent-linux-${process.arch}`);
  return existsSync(path) ? path : undefined;
}

/**
 * Watches `path` (absolute inside the sandbox) under the host directory `root`. Resolves once the
 * watches are in place; the events end when the watcher does (its directory went, overflow), the
 * signal aborts or the consumer stops — the watcher process is killed then, freeing its watches.
 */
export async function hostWatch(root: string, path: string, recursive: boolean, signal: AbortSignal): Promise<AsyncIterable<WatchEvent>> {
  const binary = hostAgentBinary();
  if (!binary)
    throw new SbxError('not_implemented', 'file watch needs the sbx-agent binary (npm run build), which this installation lacks');
  const child = spawn(binary, ['--watch', root, path, ...(recursive ? [] : ['--no-recursive'])], {
    stdio: ['pipe', 'pipe', 'ignore'],
    env: {},
  });
  const watch = new WatchStream(path, () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  child.stdout!.on(
    'data',
    frameSplitter((payload) => watch.payload(payload)),
  );
  child.stdin!.on('error', () => undefined);
  child.on('error', (err) => watch.fail(new SbxError('provider_error', `could not start the file watcher: ${err.message}`)));
  child.on('close', () => watch.fail(new SbxError('provider_error', 'the file watcher ended before it was ready')));
  return watch.opened(signal, 'the file watcher took too long to start');
}
