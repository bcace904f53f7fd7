import { lstat, readdir, readFile, unlink } from 'node:fs/promises';
import { join } from 'node:path';

/** Where proot extracts its loader (compiled in: it reads neither TMPDIR nor PROOT_TMP_DIR here). */
const PROOT_TMP = '/tmp';
const LOADER = /^prooted-\d+-[A-Za-z0-9]+$/;

/**
 * proot extracts a small loader into /tmp (`prooted-<pid>-XXXXXX`) at start and removes it at exit,
 * so a tracer killed with its sandbox's namespace leaves one behind. Removes this user's loaders
 * that are at least `minAgeMs` old and that no process has mapped: a live proot's tracee maps its
 * loader, and the age keeps a tracer that is just starting out of reach. Returns how many went.
 */
export async function sweepProotLoaders(minAgeMs: number, now = Date.now()): Promise<number> {
  const uid = process.getuid?.();
  const candidates: string[] = [];
  for (const name of await readdir(PROOT_TMP).catch(() => [] as string[])) {
    if (!LOADER.test(name)) continue;
    const st = await lstat(join(PROOT_TMP, name)).catch(() => null);
    if (!st || !st.isFile() || st.uid !== uid || now - st.mtimeMs < minAgeMs) continue;
    candidates.push(name);
  }
  if (candidates.length === 0) return 0;
  const mapped = await mappedLoaders();
  let removed = 0;
  for (const name of candidates) {
    if (mapped.has(name)) continue;
    await unlink(join(PROOT_TMP, name)).then(
      () => removed++,
      () => undefined,
    );
  }
  return removed;
}

/** Loader names some process maps now (from /proc/<pid>/maps of every visible process). */
async function mappedLoaders(): Promise<Set<string>> {
  const out = new Set<string>();
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const maps = await readFile(`/proc/${pid}/maps`, 'utf8').catch(() => '');
    for (const m of maps.matchAll(/\/tmp\/(prooted-\d+-[A-Za-z0-9]+)/g)) out.add(m[1]!);
  }
  return out;
}
