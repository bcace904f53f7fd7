import { badRequest, isSbxError, SbxError } from '../../../core/errors.js';
import type { FileInfo, OpenedFile } from '../../../core/ports/index.js';
import { formatMode } from '../shared/file-mode.js';
import { planGlob } from '../shared/glob.js';
import type { Envd } from './envd.js';
import { hostedExec } from './exec.js';

/** envd's EntryInfo in the proto3 JSON mapping (int64 `size` may come as a string). */
interface Entry {
  name?: string;
  type?: string;
  path?: string;
  size?: number | string;
  mode?: number;
  permissions?: string;
  modifiedTime?: string;
}

/** Deepest listing a glob with `**` asks envd for. */
const GLOB_MAX_DEPTH = 256;

/**
 * Permission and special bits of an EntryInfo `mode`: envd sends Go's os.FileMode (type bits high,
 * setuid 1<<23, setgid 1<<22, sticky 1<<20); a POSIX st_mode (S_IFMT bits set) is read as such.
 */
export function modeBits(mode: number): number {
  if (mode < 0o10000) return mode & 0o7777;
  if (mode & 0o170000 && mode < 1 << 19) return mode & 0o7777;
  let bits = mode & 0o777;
  if (mode & (1 << 23)) bits |= 0o4000;
  if (mode & (1 << 22)) bits |= 0o2000;
  if (mode & (1 << 20)) bits |= 0o1000;
  return bits;
}

function toInfo(e: Entry, fallbackPath: string): FileInfo {
  const path = typeof e.path === 'string' && e.path.startsWith('/') ? e.path : fallbackPath;
  const name = path === '/' ? '/' : (path.split('/').pop() ?? '');
  const size = Number(e.size ?? 0);
  return {
    name,
    path,
    size: Number.isFinite(size) ? size : 0,
    is_dir: e.type === 'FILE_TYPE_DIRECTORY',
    mod_time: new Date(typeof e.modifiedTime === 'string' && !Number.isNaN(Date.parse(e.modifiedTime)) ? e.modifiedTime : 0).toISOString(),
    mode: formatMode(modeBits(typeof e.mode === 'number' ? e.mode : 0)),
  };
}

/** File operations of hosted sandboxes: envd's Filesystem RPCs and /files, chmod through a command. */
export class HostedFiles {
  constructor(private readonly envd: Envd) {}

  async stat(id: string, path: string, signal?: AbortSignal): Promise<FileInfo> {
    const res = (await this.envd.unary(id, 'filesystem.Filesystem/Stat', { path }, 'stat', signal)) as { entry?: Entry };
    return toInfo(res.entry ?? {}, path);
  }

  /** stat, or null when the path does not exist. */
  private async maybeStat(id: string, path: string, signal?: AbortSignal): Promise<FileInfo | null> {
    try {
      return await this.stat(id, path, signal);
    } catch (err) {
      if (isSbxError(err) && err.code === 'not_found' && !/sandbox runtime is gone/.test(err.message)) return null;
      throw err;
    }
  }

  private async listDir(id: string, path: string, depth: number, signal?: AbortSignal): Promise<FileInfo[]> {
    const res = (await this.envd.unary(id, 'filesystem.Filesystem/ListDir', { path, depth }, 'list files', signal)) as {
      entries?: Entry[];
    };
    return (Array.isArray(res.entries) ? res.entries : []).map((e) => toInfo(e, `${path.replace(/\/$/, '')}/${e.name ?? ''}`));
  }

  async list(id: string, path: string, signal?: AbortSignal): Promise<FileInfo[]> {
    const st = await this.stat(id, path, signal);
    if (!st.is_dir) throw badRequest(`${path} is not a directory`);
    const prefix = path === '/' ? '/' : `${path}/`;
    const items = (await this.listDir(id, path, 1, signal)).filter(
      (i) => i.path.startsWith(prefix) && !i.path.slice(prefix.length).includes('/'),
    );
    return items.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async write(id: string, path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void> {
    if ((await this.maybeStat(id, path, signal))?.is_dir) throw badRequest(`${path} is a directory`);
    await this.envd.upload(id, path, content, signal);
    if (mode !== undefined) await this.chmodPath(id, path, mode, signal);
  }

  async read(id: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<Uint8Array> {
    const st = await this.stat(id, path, signal);
    if (st.is_dir) throw badRequest(`${path} is a directory`);
    if (maxBytes !== undefined && st.size > maxBytes)
      throw new SbxError('payload_too_large', `file is ${st.size} bytes; the limit is ${maxBytes}`);
    return this.envd.download(id, path, maxBytes, signal);
  }

  async open(id: string, path: string, maxBytes: number | undefined, signal?: AbortSignal): Promise<OpenedFile> {
    const st = await this.stat(id, path, signal);
    if (st.is_dir) throw badRequest(`${path} is a directory`);
    if (maxBytes !== undefined && st.size > maxBytes)
      throw new SbxError('payload_too_large', `file is ${st.size} bytes; the limit is ${maxBytes}`);
    return { size: st.size, body: await this.envd.openDownload(id, path, st.size, signal) };
  }

  async remove(id: string, path: string, recursive: boolean, signal?: AbortSignal): Promise<void> {
    const st = await this.stat(id, path, signal);
    if (st.is_dir && !recursive && (await this.listDir(id, path, 1, signal)).length > 0) throw badRequest(`directory ${path} is not empty`);
    await this.envd.unary(id, 'filesystem.Filesystem/Remove', { path }, 'delete file', signal);
  }

  async move(id: string, from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.stat(id, from, signal);
    await this.envd.unary(id, 'filesystem.Filesystem/Move', { source: from, destination: to }, 'move file', signal);
  }

  async chmod(id: string, path: string, mode: number, signal?: AbortSignal): Promise<void> {
    await this.stat(id, path, signal);
    await this.chmodPath(id, path, mode, signal);
  }

  /** envd has no chmod RPC: `chmod` runs in the sandbox (argv, no shell). */
  private async chmodPath(id: string, path: string, mode: number, signal?: AbortSignal): Promise<void> {
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), 30_000);
    const onAbort = () => ac.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    let code: number | null = null;
    try {
      // Relative to the root (cwd `/`): the same file as the absolute path, whatever the sandbox's mount layout.
      const rel = path === '/' ? '.' : `.${path}`;
      for await (const ev of hostedExec(
        this.envd,
        id,
        { command: 'chmod', args: [(mode & 0o7777).toString(8), '--', rel], mode: 'argv', env: {}, workdir: '/' },
        ac.signal,
      )) {
        if (ev.stream === 'exit') code = ev.exit_code;
      }
    } finally {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    }
    if (code !== 0)
      throw new SbxError('provider_error', `chmod: the sandbox's chmod ${code === null ? 'did not finish' : `exited with ${code}`}`);
  }

  async glob(id: string, pattern: string, signal?: AbortSignal): Promise<string[]> {
    const plan = planGlob(pattern);
    const base = await this.maybeStat(id, plan.base, signal);
    if (!base) return [];
    if (plan.depth === 0) return plan.regex.test(plan.base) ? [plan.base] : [];
    if (!base.is_dir) return [];
    const depth = Number.isFinite(plan.depth) ? plan.depth : GLOB_MAX_DEPTH;
    const all = await this.listDir(id, plan.base, depth, signal);
    return [...new Set(all.map((e) => e.path).filter((p) => plan.regex.test(p)))].sort();
  }
}
