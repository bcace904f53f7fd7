import { posix } from 'node:path';
import type Docker from 'dockerode';
import { badRequest, isSbxError, notFound, SbxError } from '../../../core/errors.js';
import type { FileInfo, OpenedFile } from '../../../core/ports/index.js';
import { bytesOnce, fileTooLarge, readAll } from '../../../core/sandboxes/file-bytes.js';
import { formatMode } from '../shared/file-mode.js';
import { planGlob } from '../shared/glob.js';
import { existingMode, OPEN_TIMEOUT_MS, openViaArchive, type Owner, statViaArchive, writeViaArchive } from './archive.js';
import { bounded } from './errors.js';
import { runArgv, type RunResult } from './run.js';

/*
 * File operations that are not archive transfers run as argv execs: fixed scripts, with every
 * caller-supplied path passed as a positional parameter ("$1"), never spliced into script text.
 * The scripts answer with reserved exit codes so errors are classified without parsing messages.
 */
const E_MISSING = 91;
const E_NOT_DIR = 92;
const E_IS_DIR = 93;
const E_NOT_EMPTY = 94;
const E_TOO_BIG = 95;

// `%s %f %Y %n`: size, raw mode (hex, with type bits), mtime (s), name last so spaces survive.
const STAT_FMT = '%s %f %Y %n';

const SCRIPTS = {
  stat: `[ -e "$1" ] || exit ${E_MISSING}; exec stat -L -c '${STAT_FMT}' -- "$1"`,
  // cd + "./name" records: a line not starting with a record header continues a name with a newline.
  // Entries are stat'ed through links like stat(2); dangling links drop out of the listing.
  list:
    `[ -e "$1" ] || exit ${E_MISSING}; [ -d "$1" ] || exit ${E_NOT_DIR}; cd -- "$1" || exit 1; find . ` +
    `-mindepth 1 -maxdepth 1 -exec stat -L -c '${STAT_FMT}' -- {} + 2>/dev/null; exit 0`,
  // "." is the base itself; find does not descend into symlinked directories.
  scan:
    `[ -e "$1" ] || [ -L "$1" ] || exit 0; [ -d "$1" ] || { printf '.\\0'; exit 0; }; cd -- "$1" || exit ` +
    `0; if [ -n "$2" ]; then exec find . -maxdepth "$2" -print0; else exec find . -print0; fi`,
  mkdir: `mkdir -p -- "$1" 2>/dev/null || { [ -e "$1" ] && [ ! -d "$1" ] && exit ${E_NOT_DIR}; exit 1; }`,
  move:
    `[ -e "$1" ] || [ -L "$1" ] || exit ${E_MISSING}; [ -d "$2" ] && [ ! -L "$2" ] && exit ${E_IS_DIR}; ` +
    `d=$(dirname -- "$2"); [ -d "$d" ] || mkdir -p -- "$d" || exit 1; exec mv -f -- "$1" "$2"`,
  chmod: `[ -e "$1" ] || exit ${E_MISSING}; exec chmod "$2" -- "$1"`,
  remove:
    `if [ -d "$1" ] && [ ! -L "$1" ]; then [ -z "$(ls -A -- "$1")" ] || exit ${E_NOT_EMPTY}; exec rmdir ` +
    `-- "$1"; fi; [ -e "$1" ] || [ -L "$1" ] || exit ${E_MISSING}; exec rm -f -- "$1"`,
  removeAll: `[ -e "$1" ] || [ -L "$1" ] || exit ${E_MISSING}; exec rm -rf -- "$1"`,
  // Read-only rootfs: tmpfs mounts are invisible to the archive API, so bytes go through exec.
  // A file over the limit ($2) is refused before a byte is sent; its size goes to stderr.
  cat:
    `[ -e "$1" ] || exit ${E_MISSING}; [ -d "$1" ] && exit ${E_IS_DIR}; s=$(stat -L -c %s -- "$1") || exit ` +
    `1; [ "$s" -gt "$2" ] && { echo "$s" >&2; exit ${E_TOO_BIG}; }; exec cat -- "$1"`,
  // An overwrite without a mode keeps the old one; a new file gets 0644 whatever the umask.
  put:
    `[ -d "$1" ] && exit ${E_IS_DIR}; m=$2; [ -z "$m" ] && [ ! -e "$1" ] && m=644; d=$(dirname -- "$1"); [ ` +
    `-d "$d" ] || mkdir -p -- "$d" || exit 1; cat > "$1" || exit 1; [ -z "$m" ] || exec chmod "$m" -- "$1"`,
} as const;

const RECORD_RE = /^(\d+) ([0-9a-f]+) (-?\d+) (.*)$/s;
const RECORD_HEAD = /^\d+ [0-9a-f]+ -?\d+ \.\//;

export interface FileOpsOptions {
  /** Bytes through exec instead of the archive API (read-only rootfs with tmpfs mounts). */
  viaExec: boolean;
  /**
   * Owner of files written through the archive API (a `user` is set). Set in the tar header:
   * the engine's own copyUIDGID looks the user up in the host's passwd file, not the image's.
   */
  owner?: Owner;
  /** Every operation runs as this uid/gid (a pool workspace): the kernel's permissions apply. Implies viaExec. */
  user?: { uid: number; gid: number };
}

// Reads through exec are bounded even when the caller gives no limit.
const EXEC_READ_MAX = 1024 * 1024 * 1024;
/** Kernel filesystems mounted in every container, which the archive API cannot read. */
const KERNEL_FS = /^\/(proc|sys|dev)(\/|$)/;

/** The Provider file methods for one engine. */
export class DockerFiles {
  constructor(
    private readonly docker: Docker,
    private readonly opts: FileOpsOptions,
  ) {}

  /** A whole read: the streaming one collected, bounded end to end. */
  async read(runtimeId: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<Uint8Array> {
    return readAll(await this.open(runtimeId, path, maxBytes, bounded(signal, OPEN_TIMEOUT_MS)));
  }

  /**
   * A streaming read through the archive API; through `cat` in the container where the archive
   * API cannot see (read-only root, kernel filesystems).
   */
  async open(runtimeId: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<OpenedFile> {
    if (!this.opts.viaExec) {
      try {
        return await openViaArchive(this.docker, runtimeId, path, maxBytes, signal);
      } catch (err) {
        if (!kernelFileMissing(err, path)) throw err;
      }
    }
    const data = await this.readViaExec(runtimeId, path, maxBytes, signal);
    return { size: data.byteLength, body: bytesOnce(data) };
  }

  /** A read by `cat` in the container, bounded: endless files (/dev/zero) stop at the limit. */
  private async readViaExec(runtimeId: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<Uint8Array> {
    const max = Math.min(maxBytes ?? EXEC_READ_MAX, EXEC_READ_MAX);
    let r: RunResult;
    try {
      r = await runArgv(this.docker, runtimeId, ['/bin/sh', '-c', SCRIPTS.cat, 'sbx-cat', path, String(max)], {
        signal,
        maxBytes: max,
        user: this.opts.user,
      });
    } catch (err) {
      // Files whose size stat cannot tell (kernel files report 0) are cut off as they stream.
      if (isSbxError(err) && err.code === 'payload_too_large')
        throw new SbxError('payload_too_large', `${path} is larger than the limit of ${max} bytes`);
      throw err;
    }
    if (r.exitCode === E_TOO_BIG) throw fileTooLarge(Number(r.stderr.trim()), max);
    if (r.exitCode !== 0) throw classify(r, `read ${path}`);
    return r.stdout;
  }

  async write(runtimeId: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void> {
    if (this.opts.viaExec) {
      const m = mode === undefined ? '' : (mode & 0o7777).toString(8);
      await this.script(runtimeId, 'put', [path, m], `write ${path}`, signal, { stdin: content });
      return;
    }
    // An overwrite without a mode keeps the old mode, which only the engine knows: one HEAD (a
    // stat, no process) before the PUT. With a mode the PUT is the only engine call.
    const m = mode ?? (await existingMode(this.docker, runtimeId, path, signal)) ?? 0o644;
    const mkdirP = (dir: string) => this.script(runtimeId, 'mkdir', [dir], `write ${path}`, signal).then(() => undefined);
    await writeViaArchive(this.docker, runtimeId, path, content, m, mkdirP, { owner: this.opts.owner, signal });
  }

  async remove(runtimeId: string, path: string, recursive: boolean, signal?: AbortSignal): Promise<void> {
    await this.script(runtimeId, recursive ? 'removeAll' : 'remove', [path], `delete ${path}`, signal);
  }

  async move(runtimeId: string, from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.script(runtimeId, 'move', [from, to], `move ${from}`, signal);
  }

  async chmod(runtimeId: string, path: string, mode: number, signal?: AbortSignal): Promise<void> {
    await this.script(runtimeId, 'chmod', [path, (mode & 0o7777).toString(8)], `chmod ${path}`, signal);
  }

  async stat(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo> {
    if (!this.opts.viaExec) {
      // Fast path: one HEAD on the archive API instead of spawning a process.
      const st = await statViaArchive(this.docker, runtimeId, path, signal);
      if (st) {
        return {
          name: path === '/' ? '/' : posix.basename(path),
          path,
          size: st.size,
          is_dir: st.isDir,
          mod_time: new Date(Math.floor(st.mtime.getTime() / 1000) * 1000).toISOString(),
          mode: formatMode(st.perm),
        };
      }
    }
    const r = await this.script(runtimeId, 'stat', [path], `stat ${path}`, signal);
    const m = RECORD_RE.exec(r.stdout.toString('utf8').replace(/\n$/, ''));
    if (!m) throw new SbxError('provider_error', `stat ${path}: unexpected output`);
    return info(path, m);
  }

  async list(runtimeId: string, path: string, signal?: AbortSignal): Promise<FileInfo[]> {
    const r = await this.script(runtimeId, 'list', [path], `list ${path}`, signal);
    const records: string[] = [];
    for (const line of r.stdout.toString('utf8').split('\n')) {
      if (RECORD_HEAD.test(line) || records.length === 0) records.push(line);
      else records[records.length - 1] += `\n${line}`;
    }
    // The last line is the terminator of the last record; an empty listing leaves ['' ].
    if (records.length > 0 && records[records.length - 1]!.endsWith('\n')) {
      records[records.length - 1] = records[records.length - 1]!.slice(0, -1);
    }
    const out: FileInfo[] = [];
    for (const rec of records) {
      const m = RECORD_RE.exec(rec);
      if (!m || !m[4]!.startsWith('./')) continue;
      out.push(info(posix.join(path, m[4]!.slice(2)), m));
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async glob(runtimeId: string, pattern: string, signal?: AbortSignal): Promise<string[]> {
    const plan = planGlob(pattern);
    const depth = Number.isFinite(plan.depth) ? String(plan.depth) : '';
    const r = await this.script(runtimeId, 'scan', [plan.base, depth], `glob ${pattern}`, signal);
    const found = r.stdout
      .toString('utf8')
      .split('\0')
      .filter((s) => s === '.' || s.startsWith('./'))
      .map((s) => (s === '.' ? plan.base : posix.join(plan.base, s.slice(2))));
    return found.filter((p) => plan.regex.test(p)).sort();
  }

  private async script(
    runtimeId: string,
    name: keyof typeof SCRIPTS,
    args: string[],
    what: string,
    signal: AbortSignal | undefined,
    extra: { stdin?: Uint8Array; maxBytes?: number } = {},
  ): Promise<RunResult> {
    const r = await runArgv(this.docker, runtimeId, ['/bin/sh', '-c', SCRIPTS[name], `sbx-${name}`, ...args], {
      signal,
      user: this.opts.user,
      ...extra,
    });
    if (r.exitCode === 0) return r;
    throw classify(r, what);
  }
}

function classify(r: RunResult, what: string): SbxError {
  switch (r.exitCode) {
    case E_MISSING:
      return notFound(`${what}: no such file or directory`);
    case E_NOT_DIR:
      return badRequest(`${what}: not a directory`);
    case E_IS_DIR:
      return badRequest(`${what}: is a directory`);
    case E_NOT_EMPTY:
      return badRequest(`${what}: directory not empty (use recursive)`);
  }
  if (/No such file or directory/.test(r.stderr)) return notFound(`${what}: no such file or directory`);
  if (/Permission denied|not permitted|Read-only file system/i.test(r.stderr)) return badRequest(`${what}: permission denied`);
  if (/Not a directory/.test(r.stderr)) return badRequest(`${what}: not a directory`);
  return new SbxError('provider_error', `${what}: failed (exit ${r.exitCode})`);
}

function info(path: string, m: RegExpExecArray): FileInfo {
  const raw = parseInt(m[2]!, 16);
  return {
    name: path === '/' ? '/' : posix.basename(path),
    path,
    size: Number(m[1]),
    is_dir: (raw & 0o170000) === 0o040000,
    mod_time: new Date(Number(m[3]) * 1000).toISOString(),
    mode: formatMode(raw),
  };
}

/**
 * The archive API sees the container's filesystem but not the kernel's (/proc, /sys, /dev):
 * there a missing path is asked again of the container itself.
 */
function kernelFileMissing(err: unknown, path: string): boolean {
  return isSbxError(err) && err.code === 'not_found' && KERNEL_FS.test(path);
}
