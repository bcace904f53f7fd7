/**
 * A pool workspace in a host-directory runtime (mock, proot; DESIGN.md §8): `/workspace/<name>`
 * of the runtime, mode 0700. The API's file operations are confined to it by handle (a path or a
 * symlink can never reach another workspace through the API); exec starts there but runs as the
 * runtime's user, like every mock and proot command: these providers confine paths and PID
 * namespaces, not users (isolation `paths`, stated in SECURITY.md).
 */
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { isSbxError, SbxError } from '../../../core/errors.js';
import { workspacePath } from '../../../core/pool/workspace.js';
import type { ExecEvent, ExecSpec, WorkspaceOps, WorkspaceSpec } from '../../../core/ports/index.js';
import { HostFs } from './host-fs.js';
import type { HostRuntimes } from './host-runtimes.js';

/** An exec of the provider (its launcher and console) in the PID namespace `ns` of the runtime. */
export type ExecIn = (runtimeId: string, ns: string, spec: ExecSpec, signal: AbortSignal) => AsyncIterable<ExecEvent>;

/**
 * The workspace has a PID namespace of its own (keeper.ts, named by the workspace): its execs see
 * and signal only each other, what it leaves running ends with it, and its previews reach only the
 * listeners of its own processes.
 */
export function hostWorkspace(rt: HostRuntimes, runtimeId: string, ws: WorkspaceSpec, execIn: ExecIn): WorkspaceOps {
  const inRuntime = workspacePath(ws);
  const inside = (p: string) => (p === '/' ? inRuntime : `${inRuntime}${p}`);
  /** The workspace's own confined tree, resolved inside the runtime's root. */
  const fs = async (): Promise<HostFs> => {
    try {
      return new HostFs(await rt.fs(runtimeId).hostDir(inRuntime));
    } catch {
      throw new SbxError('not_found', `workspace ${ws.name} not found`);
    }
  };
  return {
    isolation: 'paths',
    async prepare() {
      const parent = await rt.fs(runtimeId).hostDir('/workspace');
      await mkdir(join(parent, ws.name), { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'EEXIST') throw new SbxError('provider_error', 'workspace setup failed');
      });
    },
    async remove() {
      await rt.keepers.stop(runtimeId, ws.name);
      try {
        await rt.fs(runtimeId).deleteFile(inRuntime, true);
      } catch (err) {
        if (!(isSbxError(err) && err.code === 'not_found')) throw err;
      }
    },
    exec: (spec, signal) => execIn(runtimeId, ws.name, { ...spec, workdir: inside(spec.workdir ?? '/') }, signal),
    listenerOwned: (port) => rt.keepers.listenerOwned(runtimeId, ws.name, port),
    writeFile: async (p, content, mode) => (await fs()).writeFile(p, content, mode),
    writeFileStream: async (p, body, mode) => (await fs()).writeFileStream(p, body, mode),
    readFile: async (p, _signal, maxBytes) => (await fs()).readFile(p, maxBytes),
    deleteFile: async (p, recursive) => (await fs()).deleteFile(p, recursive),
    listFiles: async (p) => (await fs()).listFiles(p),
    moveFile: async (from, to) => (await fs()).moveFile(from, to),
    chmod: async (p, mode) => (await fs()).chmod(p, mode),
    stat: async (p) => (await fs()).stat(p),
    glob: async (pattern) => (await fs()).glob(pattern),
  };
}
