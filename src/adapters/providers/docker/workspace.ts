/**
 * A pool workspace in a docker container (DESIGN.md §8): `/workspace/<name>`, owned by the
 * tenant's own uid with mode 0700. Exec and every file operation run as that uid, so the kernel
 * keeps tenants apart — a symlink planted in one workspace cannot make the API read or write
 * another's, since the API acts with the tenant's permissions, never root's. Releasing it ends
 * every process of that uid first (the pool never gives the uid to anyone else), and a preview
 * reaches a port only while the socket listening there is that uid's.
 */
import { posix } from 'node:path';
import type Docker from 'dockerode';
import { SbxError } from '../../../core/errors.js';
import { workspacePath } from '../../../core/pool/workspace.js';
import type { FileInfo, Provider, WorkspaceOps, WorkspaceSpec } from '../../../core/ports/index.js';
import { putDirectory } from './archive.js';
import { DockerFiles } from './files.js';
import type { DockerAgents } from './agent.js';
import { containerListenerOwned } from './listeners.js';
import { runArgv, runAsContainer } from './run.js';

/**
 * As the tenant, on release: every process of its uid killed — `kill -9 -1` as that uid reaches
 * exactly those (the container's root has no CAP_KILL), repeated until /proc shows none but
 * zombies, as a loop that forks meanwhile is caught by the next pass (bounded, about 5 s: exit 3,
 * and the destroy is retried) — then its files in the shared temporary directories and
 * everything in the workspace removed.
 */
const RELEASE = `u=$2; n=0
while :; do
  kill -9 -1 2>/dev/null; left=0
  for f in /proc/[0-9]*/status; do
    [ "$f" = "/proc/$$/status" ] && continue
    z=0; mine=0
    { while read -r k a b c _; do
        case $k in State:) [ "$a" = Z ] && z=1 ;; Uid:) { [ "$a" = "$u" ] || [ "$b" = "$u" ] || [ "$c" = "$u" ]; } && mine=1; break ;; esac
      done < "$f"; } 2>/dev/null
    [ $mine = 1 ] && [ $z = 0 ] && left=1 && break
  done
  [ $left = 0 ] && break
  n=$((n + 1)); [ $n -ge 100 ] && exit 3; [ $n -gt 5 ] && sleep 0.05
done
find /tmp /var/tmp /dev/shm -xdev -user "$u" ! -type d -exec rm -f -- {} + 2>/dev/null
[ -d "$1" ] || exit 0; chmod -R u+rwX -- "$1" 2>/dev/null; find "$1" -mindepth 1 -maxdepth 1 -exec rm -rf -- {} + ; exit 0`;
/** As the container's user (root owns /workspace): the empty directory goes. */
const RMDIR = '[ -d "$1" ] || exit 0; exec rmdir -- "$1"';

/** `exec` is the provider's own (console capture, kill on abort); `agents` the provider's, for quiet reads as the container's user. */
export function dockerWorkspace(
  docker: Docker,
  agents: DockerAgents | undefined,
  runtimeId: string,
  ws: WorkspaceSpec,
  exec: Provider['exec'],
): WorkspaceOps {
  const root = workspacePath(ws);
  const user = { uid: ws.uid, gid: ws.gid };
  const files = new DockerFiles(docker, { viaExec: true, user });
  /** A tenant path (`/a.txt`) in the container. */
  const inside = (p: string) => (p === '/' ? root : `${root}${p}`);
  /** A container path back as the tenant's. */
  const outside = (p: string) => (p === root ? '/' : p.startsWith(`${root}/`) ? p.slice(root.length) : p);
  const info = (f: FileInfo): FileInfo => ({ ...f, path: outside(f.path), name: f.path === root ? '/' : f.name });
  const run = async (script: string, what: string, as: typeof user | undefined, signal?: AbortSignal) => {
    const r = await runArgv(docker, runtimeId, ['/bin/sh', '-c', script, 'sbx-ws', root, String(ws.uid)], {
      signal,
      ...(as ? { user: as } : {}),
    });
    if (r.exitCode !== 0) throw new SbxError('provider_error', `${what} failed (exit ${r.exitCode})`);
  };
  return {
    isolation: 'uid',
    // The engine makes the directory (owner and mode from the tar header): no capability needed in
    // the container, whose processes have none.
    prepare: (signal) => putDirectory(docker, runtimeId, root, 0o700, { uid: ws.uid, gid: ws.gid }, signal),
    async remove(signal) {
      await run(RELEASE, 'workspace removal', user, signal);
      await run(RMDIR, 'workspace removal', undefined, signal);
    },
    exec: (spec, signal) =>
      exec(runtimeId, { ...spec, user, workdir: inside(spec.workdir ?? '/'), env: { HOME: root, ...spec.env } }, signal),
    listenerOwned: (port, host, signal) =>
      containerListenerOwned((id, argv, s) => runAsContainer(docker, agents, id, argv, s), runtimeId, host, port, ws.uid, signal),
    writeFile: (p, content, mode, signal) => files.write(runtimeId, inside(p), content, mode, signal),
    readFile: (p, signal, maxBytes) => files.read(runtimeId, inside(p), maxBytes, signal),
    openFile: (p, signal, maxBytes) => files.open(runtimeId, inside(p), maxBytes, signal),
    deleteFile: (p, recursive, signal) => files.remove(runtimeId, inside(p), recursive, signal),
    listFiles: async (p, signal) => (await files.list(runtimeId, inside(p), signal)).map(info),
    moveFile: (from, to, signal) => files.move(runtimeId, inside(from), inside(to), signal),
    chmod: (p, mode, signal) => files.chmod(runtimeId, inside(p), mode, signal),
    stat: async (p, signal) => info(await files.stat(runtimeId, inside(p), signal)),
    glob: async (pattern, signal) => (await files.glob(runtimeId, posix.join(root, pattern), signal)).map(outside),
  };
}
