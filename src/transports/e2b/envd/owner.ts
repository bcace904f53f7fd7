import { SbxError } from '../../../core/errors.js';
import type { EnvdDeps } from './deps.js';
import type { EnvdTarget } from './target.js';
import type { Account } from './users.js';

/** `$1`'s directory made, then stdin into `$1`: run as the calling user, with its permissions. */
const WRITE = 'set -e; d=${1%/*}; [ -z "$d" ] || mkdir -p -- "$d"; cat > "$1"';
const MKDIR = 'mkdir -p -- "$1"';
const MOVE = 'mv -f -- "$1" "$2"';
const REMOVE = 'rm -rf -- "$1"';
/** A write as the user may take this long (a slow upload streams through it), or the owner's exec maximum when lower. */
const WRITE_TIMEOUT_MS = 30 * 60_000;

/**
 * Whether a file call acts as `account` in the sandbox rather than as the runtime's own user: when
 * the sandbox has that account and it is not root (DESIGN.md §14: as that user when the sandbox
 * has it, else as the default user).
 */
export function actsAs(account: Account | null): account is Account {
  return account !== null && account.uid !== 0;
}

/**
 * E2B writes a file as the calling user: the file and the directories it makes are the user's, and
 * the user's permissions decide (a root-owned directory refuses it, as on E2B). Done by the user
 * itself — a command run as its uid/gid that makes the directory and copies stdin into the file,
 * the body streamed into it and bounded by `limits.max_file_bytes` — so nothing is chowned and no
 * path is resolved with more rights than the user has (a symlink swapped in by code in the sandbox
 * leads only where the user could write anyway). The sandbox's own containers drop every
 * capability, so root in the sandbox could not chown; the engine sets the user of the command.
 */
export async function writeAsUser(
  deps: EnvdDeps,
  t: EnvdTarget,
  account: Account,
  path: string,
  body: Uint8Array | AsyncIterable<Uint8Array>,
): Promise<void> {
  const max = deps.sandboxes.deps.settings.limits.max_file_bytes;
  const stdin =
    body instanceof Uint8Array
      ? checkSize(body.byteLength, max, body)
      : (async function* () {
          let size = 0;
          for await (const chunk of body) {
            size += chunk.byteLength;
            checkSize(size, max, null);
            yield chunk;
          }
        })();
  await runAs(deps, t, account, WRITE, [path], `write ${path}`, stdin);
}

/** E2B's makeDir as the calling user: the directories it makes are the user's. */
export async function makeDirAsUser(deps: EnvdDeps, t: EnvdTarget, account: Account, path: string): Promise<void> {
  await runAs(deps, t, account, MKDIR, [path], `make directory ${path}`, undefined);
}

/**
 * E2B's move and remove as the calling user: root in an sbx container holds no capability, so it
 * could not change a directory the user owns; the user's own permissions decide, as on E2B.
 */
export async function moveAsUser(deps: EnvdDeps, t: EnvdTarget, account: Account, from: string, to: string): Promise<void> {
  await runAs(deps, t, account, MOVE, [from, to], `move ${from}`, undefined);
}

export async function removeAsUser(deps: EnvdDeps, t: EnvdTarget, account: Account, path: string): Promise<void> {
  await runAs(deps, t, account, REMOVE, [path], `remove ${path}`, undefined);
}

function checkSize<T>(size: number, max: number, pass: T): T {
  if (size > max) throw new SbxError('payload_too_large', `the file is larger than the limit of ${max} bytes (limits.max_file_bytes)`);
  return pass;
}

async function runAs(
  deps: EnvdDeps,
  t: EnvdTarget,
  account: Account,
  script: string,
  paths: string[],
  what: string,
  stdin: Uint8Array | AsyncIterable<Uint8Array> | undefined,
): Promise<void> {
  const max = (await deps.sandboxes.deps.admission.limitsFor(t.rec.owner_id)).max_exec_timeout_ms;
  const timeout = `${max > 0 ? Math.min(max, WRITE_TIMEOUT_MS) : WRITE_TIMEOUT_MS}ms`;
  const r = await deps.exec.run(
    t.rec.id,
    {
      command: '/bin/sh',
      args: ['-c', script, 'sbx-e2b', ...paths],
      mode: 'argv',
      timeout,
      user: { uid: account.uid, gid: account.gid },
      ...(stdin !== undefined ? { stdin } : {}),
    },
    t.caller,
  );
  if (r.exit_code === 0) return;
  const err = Buffer.from(r.stderr).toString('utf8').slice(0, 300);
  if (/permission denied|read-only file system/i.test(err))
    throw new SbxError('forbidden', `${what}: permission denied for ${account.name}`);
  if (/not a directory|is a directory|file exists/i.test(err)) throw new SbxError('bad_request', `${what}: ${lastLine(err)}`);
  if (/no space left/i.test(err)) throw new SbxError('resource_limit', `${what}: no space left on the sandbox's disk`);
  throw new SbxError('provider_error', `${what} as ${account.name} failed (exit ${r.exit_code}): ${lastLine(err)}`);
}

function lastLine(text: string): string {
  return text.trim().split('\n').pop() ?? '';
}
