/**
 * Symlink-swap race (issue 12, defect 1): for 10 s per host-file provider, the file API works on
 * paths whose parent an exec inside the sandbox keeps flipping between a real directory and a
 * symlink to a host directory outside the sandbox root. Nothing outside may be written, read,
 * created, deleted or chmod-ed through the API.
 */
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { api, ensureBuilt, installationOf, makeRootfs, PROOT, record, serve, skipWhy, tempDir, type Served } from './harness.js';

const RACE_MS = 10_000;
type Kind = 'read' | 'list' | 'stat' | 'other';
/** Names of the operations below, in order, for the examples in the figures. */
const OP_NAMES = [
  'write d/w-N.txt',
  'write l',
  'write d/sub/new-N/f.txt (mkdir)',
  'write d/victim.txt',
  'read l',
  'read d/victim.txt',
  'read d/sub/inner-victim.txt',
  'list d',
  'list d/sub',
  'glob d/*',
  'stat d/victim.txt',
  'stat d/hostonly.txt',
  'chmod d/victim.txt',
  'chmod l',
  'chmod d/sub',
  'move d/victim.txt out',
  'move d/sub out',
  'move into d/',
  'delete -r d/sub',
  'delete d/victim.txt',
  'delete l',
];
const WORKERS = 4;

interface Entry {
  kind: 'file' | 'dir';
  mode: number;
  content?: string;
}

function snapshot(dir: string, base = dir, out = new Map<string, Entry>()): Map<string, Entry> {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    const rel = p.slice(base.length);
    if (st.isDirectory()) {
      out.set(rel, { kind: 'dir', mode: st.mode & 0o7777 });
      snapshot(p, base, out);
    } else out.set(rel, { kind: 'file', mode: st.mode & 0o7777, content: readFileSync(p, 'utf8') });
  }
  return out;
}

/** The exec that flips `d` (dir ↔ symlink to OUT) and `l` (file ↔ symlink to OUT's file), bounded in time. */
function flipper(outside: string, seconds: number): string {
  return [
    `end=$(( $(date +%s) + ${seconds} ))`,
    `while [ "$(date +%s)" -lt "$end" ]; do`,
    `  i=0; while [ $i -lt 50 ]; do`,
    `    rm -rf d; mkdir -p d/x && echo inner > d/inner.txt`,
    `    rm -rf d; ln -s '${outside}' d`,
    `    rm -f l; echo plain > l`,
    `    rm -f l; ln -s '${outside}/victim.txt' l`,
    `    i=$((i+1))`,
    `  done`,
    `done`,
    `rm -rf d l; echo flipped`,
  ].join('\n');
}

async function race(provider: 'mock' | 'proot'): Promise<void> {
  const t = tempDir(`race-${provider}`);
  const outside = join(t.dir, 'outside');
  const token = `HOSTSECRET${Date.now().toString(36)}`;
  mkdirSync(join(outside, 'sub', 'deeper'), { recursive: true });
  writeFileSync(join(outside, 'victim.txt'), `victim ${token}\n`, { mode: 0o644 });
  writeFileSync(join(outside, 'sub', 'inner-victim.txt'), `inner ${token}\n`, { mode: 0o640 });
  writeFileSync(join(outside, 'sub', 'deeper', 'deep.txt'), `deep ${token}\n`, { mode: 0o600 });
  // A name the API never creates: seeing it in a listing means the listing was of the host dir.
  writeFileSync(join(outside, 'hostonly.txt'), `hostonly ${token}\n`, { mode: 0o644 });
  const victimSize = Buffer.byteLength(`victim ${token}\n`);
  const before = snapshot(outside);
  const home = join(t.dir, 'home');
  let s: Served | undefined;
  try {
    const config: Record<string, unknown> =
      provider === 'mock'
        ? { providers: { default: 'mock', mock: { root_dir: join(home, 'mock') } } }
        : { providers: { default: 'proot', proot: { rootfs: makeRootfs(t.dir) } } };
    s = await serve(home, { config });
    const sb = await api(s.url, 'POST', '/api/v1/sandboxes', { ttl: '10m' });
    expect(sb.status).toBe(201);
    const base = `/api/v1/sandboxes/${sb.json.id}`;
    const flip = api(
      s.url,
      'POST',
      `${base}/exec`,
      { command: flipper(outside, RACE_MS / 1000 + 1), workdir: '/workspace', timeout: '60s' },
      {},
      90_000,
    );

    // Host-side witness: the flipper really makes `d` a symlink to the outside directory.
    let flipsSeen = 0;
    // proot keeps sandboxes in <TMPDIR>/sbx-proot-<installation>/<id>; serve's TMPDIR is home/tmp.
    const hostD =
      provider === 'mock'
        ? join(home, 'mock', sb.json.id, 'workspace', 'd')
        : join(home, 'tmp', `sbx-proot-${await installationOf(home)}`, sb.json.id, 'workspace', 'd');

    const counts = { requests: 0, reads_outside: 0, listings_outside: 0, status_5xx: 0, by_status: {} as Record<string, number> };
    const end = Date.now() + RACE_MS;
    const examples: string[] = [];
    const note = (r: { status: number; text: string }, kind: Kind, what: string) => {
      counts.requests++;
      counts.by_status[r.status] = (counts.by_status[r.status] ?? 0) + 1;
      let bad = r.status >= 500;
      if (r.status >= 500) counts.status_5xx++;
      if (kind === 'read' && r.status === 200 && r.text.includes(token)) {
        counts.reads_outside++;
        bad = true;
      }
      const listed = kind === 'list' && r.status === 200 && /hostonly\.txt|inner-victim|"deeper"|\/deeper/.test(r.text);
      const statted = kind === 'stat' && r.status === 200 && (r as { json?: { size?: number } }).json?.size === victimSize;
      if (listed || statted) {
        counts.listings_outside++;
        bad = true;
      }
      if (bad && examples.length < 5) examples.push(`${what} → ${r.status} ${r.text.slice(0, 160)}`);
    };
    const q = encodeURIComponent;
    const worker = async (w: number) => {
      let n = 0;
      while (Date.now() < end) {
        n++;
        const tag = `${w}-${n}`;
        try {
          if (lstatSync(hostD).isSymbolicLink() && readlinkSync(hostD) === outside) flipsSeen++;
        } catch {
          /* between flips */
        }
        const ops: Array<[Promise<{ status: number; text: string }>, Kind]> = [
          [api(s!.url, 'POST', `${base}/files`, { path: `/workspace/d/w-${tag}.txt`, content: 'pwned' }), 'other'],
          [api(s!.url, 'POST', `${base}/files`, { path: '/workspace/l', content: 'pwned' }), 'other'],
          [api(s!.url, 'POST', `${base}/files`, { path: `/workspace/d/sub/new-${tag}/f.txt`, content: 'pwned' }), 'other'],
          [api(s!.url, 'POST', `${base}/files`, { path: '/workspace/d/victim.txt', content: 'pwned' }), 'other'],
          [api(s!.url, 'GET', `${base}/files?path=${q('/workspace/l')}`), 'read'],
          [api(s!.url, 'GET', `${base}/files?path=${q('/workspace/d/victim.txt')}`), 'read'],
          [api(s!.url, 'GET', `${base}/files?path=${q('/workspace/d/sub/inner-victim.txt')}`), 'read'],
          [api(s!.url, 'GET', `${base}/files/list?path=${q('/workspace/d')}`), 'list'],
          [api(s!.url, 'GET', `${base}/files/list?path=${q('/workspace/d/sub')}`), 'list'],
          [api(s!.url, 'GET', `${base}/files/glob?pattern=${q('/workspace/d/*')}`), 'list'],
          [api(s!.url, 'GET', `${base}/files/stat?path=${q('/workspace/d/victim.txt')}`), 'stat'],
          [api(s!.url, 'GET', `${base}/files/stat?path=${q('/workspace/d/hostonly.txt')}`), 'list'],
          [api(s!.url, 'POST', `${base}/files/chmod`, { path: '/workspace/d/victim.txt', mode: '0777' }), 'other'],
          [api(s!.url, 'POST', `${base}/files/chmod`, { path: '/workspace/l', mode: '0600' }), 'other'],
          [api(s!.url, 'POST', `${base}/files/chmod`, { path: '/workspace/d/sub', mode: '0700' }), 'other'],
          [
            api(s!.url, 'POST', `${base}/files/move`, { old_path: '/workspace/d/victim.txt', new_path: `/workspace/moved-${tag}.txt` }),
            'other',
          ],
          [api(s!.url, 'POST', `${base}/files/move`, { old_path: '/workspace/d/sub', new_path: `/workspace/moved-sub-${tag}` }), 'other'],
          [
            api(s!.url, 'POST', `${base}/files`, { path: `/workspace/src-${tag}.txt`, content: 'pwned' }).then(() =>
              api(s!.url, 'POST', `${base}/files/move`, { old_path: `/workspace/src-${tag}.txt`, new_path: `/workspace/d/dst-${tag}.txt` }),
            ),
            'other',
          ],
          [api(s!.url, 'DELETE', `${base}/files?path=${q('/workspace/d/sub')}&recursive=true`), 'other'],
          [api(s!.url, 'DELETE', `${base}/files?path=${q('/workspace/d/victim.txt')}`), 'other'],
          [api(s!.url, 'DELETE', `${base}/files?path=${q('/workspace/l')}`), 'other'],
        ];
        for (const [i, [p, kind]] of ops.entries()) note(await p, kind, OP_NAMES[i] ?? `op ${i}`);
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    const flipped = await flip;

    const after = snapshot(outside);
    let writes = 0;
    let deletes = 0;
    let chmods = 0;
    for (const [rel, e] of before) {
      const now = after.get(rel);
      if (!now) deletes++;
      else {
        if (now.mode !== e.mode) chmods++;
        if (now.content !== e.content) writes++;
      }
    }
    for (const rel of after.keys()) if (!before.has(rel)) writes++;
    const figures = {
      seconds: RACE_MS / 1000,
      api_requests: counts.requests,
      statuses: counts.by_status,
      flipper_exit: flipped.json?.exit_code ?? flipped.status,
      host_symlink_flips_observed: flipsSeen,
      host_writes_outside: writes,
      host_reads_outside: counts.reads_outside,
      host_listings_outside: counts.listings_outside,
      host_deletes_outside: deletes,
      host_chmods_outside: chmods,
      status_5xx: counts.status_5xx,
      examples,
    };
    record('symlink_race', provider, figures);
    expect(flipped.json?.stdout ?? flipped.text).toContain('flipped');
    // The attack really ran: the host saw `d` as a symlink to the outside directory.
    expect(flipsSeen).toBeGreaterThan(0);
    expect(s.alive()).toBe(true);
    expect(figures).toMatchObject({
      host_writes_outside: 0,
      host_reads_outside: 0,
      host_listings_outside: 0,
      host_deletes_outside: 0,
      host_chmods_outside: 0,
      status_5xx: 0,
    });
    expect(existsSync(join(outside, 'victim.txt')) && statSync(join(outside, 'victim.txt')).isFile()).toBe(true);
  } finally {
    await s?.stop();
    t.remove();
  }
}

describe('symlink-swap race through the file API', () => {
  it('mock: 0 host files touched outside the sandbox root', async () => {
    ensureBuilt();
    await race('mock');
  }, 90_000);
  it.skipIf(!PROOT)(
    `proot: 0 host files touched outside the sandbox root ${PROOT ? '' : skipWhy('SBX_TEST_PROOT')}`,
    async () => {
      await race('proot');
    },
    90_000,
  );
});
