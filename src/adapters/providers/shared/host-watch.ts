/**
 * File watch of host-directory runtimes (mock, proot; DESIGN §16): the static sbx-agent in its
 * host mode (`sbx-agent --watch ROOT PATH`, agent/watch.c) over the sandbox root — inotify with
 * IN_DONT_FOLLOW on names looked up in O_NOFOLLOW-walked parents, which Node has no binding for.
 * Paths come back relative to the root and never outside it; no symlink is ever followed. The
 * frames (`[u32 LE len][u8 kind][path NUL][old path NUL]`) are the docker agent's watch payloads.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AsyncQueue } from '../../../core/async-queue.js';
import { badRequest, notFound, SbxError } from '../../../core/errors.js';
import type { WatchEvent } from '../../../core/ports/index.js';
import { sbxPackage } from '../../../package-root.js';

const KINDS: Record<number, WatchEvent['type']> = { 1: 'create', 2: 'write', 3: 'remove', 4: 'rename', 5: 'chmod', 6: 'overflow' };
const READY = 0;
const FAILED = 255;
/** How long the watcher may take to put its watches in place (a deep tree: up to 4,096 directories). */
const READY_TIMEOUT_MS = 15_000;

/** The agent binary the package build made, for this machine's architecture; undefined when not built. */
export function hostAgentBinary(): string | undefined {
  const path = join(sbxPackage().root, 'dist', 'agent', `sbx-agent-linux-${process.arch}`);
  return existsSync(path) ? path : undefined;
}

/** One watch frame's payload: an event, the watcher being ready, or why it failed (an errno). */
export type WatchFrame = { kind: 'event'; event: WatchEvent } | { kind: 'ready' } | { kind: 'failed'; errno: number };

export function decodeWatchPayload(p: Buffer): WatchFrame | null {
  if (p.length < 1) return null;
  const kind = p[0]!;
  if (kind === READY) return { kind: 'ready' };
  if (kind === FAILED) return { kind: 'failed', errno: p.length >= 3 ? p.readUInt16LE(1) : 0 };
  const type = KINDS[kind];
  if (!type) return null;
  if (type === 'overflow') return { kind: 'event', event: { type } };
  const end = p.indexOf(0, 1);
  if (end < 0) return null;
  const path = p.subarray(1, end).toString('utf8');
  if (type !== 'rename') return { kind: 'event', event: { type, path } };
  const end2 = p.indexOf(0, end + 1);
  const old = p.subarray(end + 1, end2 < 0 ? p.length : end2).toString('utf8');
  return { kind: 'event', event: { type, path, old_path: old } };
}

/** Why a watch could not start, as the file API answers (errno numbers of Linux). */
export function watchRefusal(errno: number, path: string): SbxError {
  if (errno === 2) return notFound(`${path}: no such file or directory`);
  if (errno === 20 || errno === 40) return badRequest(`${path} is not a directory (symbolic links are not followed)`);
  if (errno === 13 || errno === 1) return badRequest(`${path}: permission denied`);
  if (errno === 36) return badRequest(`${path}: path too long`);
  return new SbxError('provider_error', `could not watch ${path} (errno ${errno})`);
}

/** Splits a byte stream into length-prefixed frames. */
export function frameSplitter(onFrame: (payload: Buffer) => void): (chunk: Buffer) => void {
  let buf: Buffer = Buffer.alloc(0);
  return (chunk) => {
    buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
    while (buf.length >= 4) {
      const len = buf.readUInt32LE(0);
      if (buf.length < 4 + len) break;
      onFrame(buf.subarray(4, 4 + len));
      buf = buf.subarray(4 + len);
    }
  };
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
  const queue = new AsyncQueue<WatchEvent>();
  let settle: ((err?: unknown) => void) | null = null;
  const ready = new Promise<void>((resolve, reject) => {
    settle = (err) => {
      settle = null;
      if (err) reject(err);
      else resolve();
    };
  });
  const stop = () => {
    queue.end();
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  };
  child.stdout!.on(
    'data',
    frameSplitter((payload) => {
      const f = decodeWatchPayload(payload);
      if (!f) return;
      if (f.kind === 'ready') settle?.();
      else if (f.kind === 'failed') settle?.(watchRefusal(f.errno, path));
      else {
        queue.push(f.event);
        if (f.event.type === 'overflow') stop();
      }
    }),
  );
  child.stdin!.on('error', () => undefined);
  child.on('error', (err) => settle?.(new SbxError('provider_error', `could not start the file watcher: ${err.message}`)));
  child.on('close', () => {
    settle?.(new SbxError('provider_error', 'the file watcher ended before it was ready'));
    queue.end();
  });
  const onAbort = () => stop();
  signal.addEventListener('abort', onAbort, { once: true });
  const timer = setTimeout(() => settle?.(new SbxError('timeout', 'the file watcher took too long to start')), READY_TIMEOUT_MS);
  try {
    await ready;
  } catch (err) {
    stop();
    signal.removeEventListener('abort', onAbort);
    throw err;
  } finally {
    clearTimeout(timer);
  }
  if (signal.aborted) stop();
  return {
    [Symbol.asyncIterator]() {
      const it = queue[Symbol.asyncIterator]();
      return {
        next: () => it.next(),
        return: async () => {
          stop();
          signal.removeEventListener('abort', onAbort);
          return it.return!();
        },
      };
    },
  };
}
