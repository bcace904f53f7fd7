import { shellWord } from '../../../shared/shell.js';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, posix, relative, resolve, sep } from 'node:path';
import type { FileInfo } from '../../../client/types.js';
import { ExitError, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { bytes, relativeTime } from '../output/format.js';
import { isRemote, parseMode, parseRemote } from '../shared/parse.js';
import { sandboxRef } from '../shared/sandbox-id.js';
import { readPipedStdin } from '../shared/stdin.js';
import type { CliContext } from '../context.js';
import type { CommandSpec } from '../spec.js';

const REMOTE = 'SANDBOX_ID:/path';

function fileColumns(ctx: CliContext) {
  return [
    { header: 'MODE', value: (f: FileInfo) => `${f.is_dir ? 'd' : '-'}${f.mode}` },
    { header: 'SIZE', value: (f: FileInfo) => (f.is_dir ? '-' : bytes(f.size)), align: 'right' as const },
    { header: 'MODIFIED', value: (f: FileInfo) => relativeTime(f.mod_time) },
    {
      header: 'NAME',
      value: (f: FileInfo) => (f.is_dir ? `${f.name}/` : f.name),
      style: (t: string, f: FileInfo) => (f.is_dir ? ctx.out.c.blue(t) : t),
    },
  ];
}

/** Local paths of every file under `dir` (recursive), sorted. */
async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await walk(p)));
    else if (entry.isFile()) out.push(p);
  }
  return out;
}

/** `ID:/path` of a command's remote argument, with a hint at the right form when the arguments look swapped. */
function remoteArg(raw: string, form: string, fallback?: string): { id: string; path: string } {
  try {
    return parseRemote(raw, fallback);
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${err.message}; usage: ${form}`);
    throw err;
  }
}

/** Remote files under `path` (recursive) as sandbox paths. */
async function walkRemote(ctx: CliContext, id: string, path: string): Promise<FileInfo[]> {
  const out: FileInfo[] = [];
  for (const f of await ctx.client.files.list(id, path, { signal: ctx.signal })) {
    if (f.is_dir) out.push(...(await walkRemote(ctx, id, f.path)));
    else out.push(f);
  }
  return out;
}

async function localStat(path: string) {
  try {
    return await stat(path);
  } catch {
    return undefined;
  }
}

const put: CommandSpec = {
  name: 'put',
  usage: '[options] LOCAL SANDBOX_ID:/path',
  summary: 'upload a local file (or - for stdin) into a sandbox',
  args: [
    { name: 'local', description: 'local file, directory with -r, or - for stdin', required: true, complete: 'file' },
    { name: 'remote', description: `${REMOTE} (a trailing / keeps the local name)`, required: true },
  ],
  options: [
    { flags: '--mode <octal>', description: 'file mode, e.g. 755' },
    { flags: '-r, --recursive', description: 'upload a directory tree' },
  ],
  examples: ['sbx files put ./main.py $ID:/workspace/', 'echo hi | sbx files put - $ID:/tmp/hi.txt'],
  async run(ctx, opts: { local: string; remote: string; mode?: string; recursive?: boolean }) {
    if (isRemote(opts.local) && !isRemote(opts.remote)) {
      throw new UsageError(
        `put uploads LOCAL to SANDBOX_ID:/path: sbx files put ${opts.remote} ${opts.local} (to download use ` +
          `sbx files get ${opts.local} ${opts.remote})`,
      );
    }
    const { id, path } = remoteArg(opts.remote, 'sbx files put LOCAL SANDBOX_ID:/path');
    const box = sandboxRef(ctx, id);
    const mode = opts.mode !== undefined ? parseMode(opts.mode, '--mode') : undefined;
    const uploads: Array<{ from: string; to: string; data?: Uint8Array }> = [];
    if (opts.local === '-') {
      if (path.endsWith('/')) throw new UsageError('with - (stdin) the remote path must name a file');
      // From a terminal there is nothing piped to upload: refuse rather than write an empty file.
      if (ctx.stdin.isTTY)
        throw new UsageError('with - the content comes from stdin, which is a terminal here (pipe or redirect a file into it)');
      uploads.push({ from: '-', to: path, data: (await readPipedStdin(ctx.stdin)) ?? new Uint8Array() });
    } else {
      const local = resolve(ctx.cwd, opts.local);
      const st = await localStat(local);
      if (!st) throw new ExitError(EXIT.failure, `${opts.local}: no such local file`);
      if (st.isDirectory()) {
        if (!opts.recursive) throw new ExitError(EXIT.failure, `${opts.local} is a directory (use -r)`);
        const root = path.endsWith('/') ? posix.join(path, basename(local)) : path;
        for (const f of await walk(local)) uploads.push({ from: f, to: posix.join(root, relative(local, f).split(sep).join('/')) });
      } else {
        uploads.push({ from: local, to: path.endsWith('/') ? posix.join(path, basename(local)) : path });
      }
    }
    for (const u of uploads) {
      const data = u.data ?? (await readFile(u.from));
      await ctx.out.spin(
        `uploading ${u.to}`,
        box.call((x) => ctx.client.files.write(x, u.to, data, { mode, signal: ctx.signal })),
      );
      if (!ctx.out.json)
        ctx.out.note(`${u.from === '-' ? 'stdin' : relative(ctx.cwd, u.from) || u.from} → ${box.id}:${u.to} (${bytes(data.byteLength)})`);
    }
    if (ctx.out.json) ctx.out.printJson(uploads.map((u) => ({ path: u.to, status: 'written' })));
    return 0;
  },
};

const get: CommandSpec = {
  name: 'get',
  usage: '[options] SANDBOX_ID:/path [LOCAL]',
  summary: 'download a file from a sandbox (LOCAL - writes to stdout)',
  args: [
    { name: 'remote', description: REMOTE, required: true },
    {
      name: 'local',
      description: 'local path or directory (default: the remote name in the current directory); - for stdout',
      complete: 'file',
    },
  ],
  options: [{ flags: '-r, --recursive', description: 'download a directory tree' }],
  async run(ctx, opts: { remote: string; local?: string; recursive?: boolean }) {
    if (!isRemote(opts.remote) && opts.local !== undefined && isRemote(opts.local)) {
      throw new UsageError(
        `get downloads SANDBOX_ID:/path to LOCAL: sbx files get ${opts.local} ${opts.remote} (to upload use ` +
          `sbx files put ${opts.remote} ${opts.local})`,
      );
    }
    const { id, path } = remoteArg(opts.remote, 'sbx files get SANDBOX_ID:/path [LOCAL]');
    const box = sandboxRef(ctx, id);
    if (opts.local === '-') {
      await ctx.out.raw('stdout', await box.call((x) => ctx.client.files.read(x, path, { signal: ctx.signal })));
      return 0;
    }
    const info = await box.call((x) => ctx.client.files.stat(x, path, { signal: ctx.signal }));
    const id2 = box.id;
    const target = resolve(ctx.cwd, opts.local ?? basename(path));
    const targetStat = await localStat(target);
    const dest = targetStat?.isDirectory() ? join(target, basename(path)) : target;
    const downloads: Array<{ from: string; to: string }> = [];
    if (info.is_dir) {
      if (!opts.recursive) throw new ExitError(EXIT.failure, `${path} is a directory (use -r)`);
      for (const f of await walkRemote(ctx, id2, path))
        downloads.push({ from: f.path, to: join(dest, ...posix.relative(path, f.path).split('/')) });
    } else {
      downloads.push({ from: path, to: dest });
    }
    for (const d of downloads) {
      const data = await ctx.out.spin(`downloading ${d.from}`, ctx.client.files.read(id2, d.from, { signal: ctx.signal }));
      await mkdir(dirname(d.to), { recursive: true });
      await writeFile(d.to, data);
      if (!ctx.out.json) ctx.out.note(`${id2}:${d.from} → ${relative(ctx.cwd, d.to) || d.to} (${bytes(data.byteLength)})`);
    }
    if (ctx.out.json) ctx.out.printJson(downloads.map((d) => ({ path: d.from, local: d.to })));
    return 0;
  },
};

const cat: CommandSpec = {
  name: 'cat',
  usage: '[options] SANDBOX_ID:/path',
  summary: 'print a file from a sandbox (raw bytes)',
  args: [{ name: 'remote', description: REMOTE, required: true }],
  async run(ctx, opts: { remote: string }) {
    const { id, path } = remoteArg(opts.remote, 'sbx files cat SANDBOX_ID:/path');
    await ctx.out.raw('stdout', await sandboxRef(ctx, id).call((x) => ctx.client.files.read(x, path, { signal: ctx.signal })));
    return 0;
  },
};

const ls: CommandSpec = {
  name: 'ls',
  usage: '[options] SANDBOX_ID[:/path]',
  summary: 'list a directory in a sandbox',
  args: [{ name: 'target', description: 'SANDBOX_ID[:/path] (default path /)', required: true }],
  async run(ctx, opts: { target: string }) {
    const { id, path } = remoteArg(opts.target, 'sbx files ls SANDBOX_ID[:/path]', '/');
    const items = await sandboxRef(ctx, id).call((x) => ctx.client.files.list(x, path, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(items);
    else if (items.length > 0) ctx.out.table(fileColumns(ctx), items);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  usage: '[options] SANDBOX_ID:/path',
  summary: 'delete a file or directory in a sandbox',
  args: [{ name: 'remote', description: REMOTE, required: true }],
  options: [{ flags: '-r, --recursive', description: 'delete a directory and its contents' }],
  async run(ctx, opts: { remote: string; recursive?: boolean }) {
    const { id, path } = remoteArg(opts.remote, 'sbx files rm [-r] SANDBOX_ID:/path');
    const box = sandboxRef(ctx, id);
    const r = await box.call((x) => ctx.client.files.remove(x, path, { recursive: opts.recursive, signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.note(`deleted ${box.id}:${path}`);
    return 0;
  },
};

const mv: CommandSpec = {
  name: 'mv',
  usage: '[options] SANDBOX_ID:/from /to',
  summary: 'move or rename inside a sandbox',
  args: [
    { name: 'from', description: REMOTE, required: true },
    { name: 'to', description: 'new path (/path or SANDBOX_ID:/path, same sandbox)', required: true },
  ],
  async run(ctx, opts: { from: string; to: string }) {
    const form = 'sbx files mv SANDBOX_ID:/from /to';
    const from = remoteArg(opts.from, form);
    const to = opts.to.startsWith('/') ? { id: from.id, path: opts.to } : remoteArg(opts.to, form);
    if (to.id !== from.id) throw new UsageError(`mv works inside one sandbox (use get and put to copy between sandboxes); usage: ${form}`);
    const box = sandboxRef(ctx, from.id);
    const r = await box.call((x) => ctx.client.files.move(x, from.path, to.path, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.note(`moved ${box.id}:${from.path} → ${to.path}`);
    return 0;
  },
};

const chmod: CommandSpec = {
  name: 'chmod',
  usage: '[options] MODE SANDBOX_ID:/path',
  summary: 'change the mode of a file in a sandbox',
  args: [
    { name: 'mode', description: 'octal mode, e.g. 755', required: true },
    { name: 'remote', description: REMOTE, required: true },
  ],
  async run(ctx, opts: { mode: string; remote: string }) {
    if (isRemote(opts.mode) && !isRemote(opts.remote))
      throw new UsageError(`the mode comes first: sbx files chmod ${opts.remote} ${opts.mode}`);
    const mode = parseMode(opts.mode);
    const { id, path } = remoteArg(opts.remote, 'sbx files chmod MODE SANDBOX_ID:/path');
    const box = sandboxRef(ctx, id);
    const r = await box.call((x) => ctx.client.files.chmod(x, path, mode, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.note(`mode of ${box.id}:${path} set to ${mode}`);
    return 0;
  },
};

const statCmd: CommandSpec = {
  name: 'stat',
  usage: '[options] SANDBOX_ID:/path',
  summary: 'show file information',
  args: [{ name: 'remote', description: REMOTE, required: true }],
  async run(ctx, opts: { remote: string }) {
    const { id, path } = remoteArg(opts.remote, 'sbx files stat SANDBOX_ID:/path');
    const f = await sandboxRef(ctx, id).call((x) => ctx.client.files.stat(x, path, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(f);
    else
      ctx.out.fields([
        ['path', f.path],
        ['type', f.is_dir ? 'directory' : 'file'],
        ['size', `${f.size} (${bytes(f.size)})`],
        ['mode', f.mode],
        ['modified', f.mod_time],
      ]);
    return 0;
  },
};

const glob: CommandSpec = {
  name: 'glob',
  usage: '[options] SANDBOX_ID:PATTERN | SANDBOX_ID PATTERN',
  summary: 'find paths matching a pattern in a sandbox',
  args: [
    { name: 'target', description: 'SANDBOX_ID:PATTERN, or SANDBOX_ID followed by PATTERN', required: true },
    { name: 'pattern', description: 'glob pattern, e.g. /workspace/*.py' },
  ],
  async run(ctx, opts: { target: string; pattern?: string }) {
    const form = "sbx files glob SANDBOX_ID:PATTERN, or sbx files glob SANDBOX_ID PATTERN (e.g. sbx files glob ID '/workspace/*.py')";
    if (opts.pattern !== undefined && opts.target.includes(':')) {
      const id = opts.target.slice(0, opts.target.indexOf(':'));
      throw new UsageError(
        `glob takes the pattern once: sbx files glob ${id || 'SANDBOX_ID'} ${shellWord(opts.pattern)} (or sbx ` +
          `files glob ${shellWord(`${id || 'SANDBOX_ID'}:${opts.pattern}`)})`,
      );
    }
    const { id, path: pattern } = opts.pattern !== undefined ? { id: opts.target, path: opts.pattern } : remoteArg(opts.target, form);
    const paths = await sandboxRef(ctx, id).call((x) => ctx.client.files.glob(x, pattern, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(paths);
    else for (const p of paths) ctx.out.line(p);
    return 0;
  },
};

const watchCmd: CommandSpec = {
  name: 'watch',
  usage: '[options] SANDBOX_ID:/path',
  summary: 'follow changes under a directory (create, write, remove, rename, chmod) until Ctrl-C',
  description:
    'One line per change: `create /path`, `rename /old -> /new`. With --json, one JSON event per line ({type, path, old_path?, ts}). ' +
    'Ends with exit 1 when the server reports overflow (the watch could not keep up), 0 when the sandbox goes or on Ctrl-C.',
  args: [{ name: 'remote', description: 'SANDBOX_ID:/dir (an existing directory)', required: true }],
  options: [{ flags: '--no-recursive', description: 'only the directory’s own entries, not its subdirectories' }],
  examples: ['sbx files watch $ID:/workspace', 'sbx files watch --json $ID:/workspace | jq -r .path'],
  async run(ctx, opts: { remote: string; recursive?: boolean }) {
    const { id, path } = remoteArg(opts.remote, 'sbx files watch SANDBOX_ID:/path');
    const box = sandboxRef(ctx, id);
    const events = await box.call(async (x) => {
      const it = ctx.client.files.watch(x, path, { recursive: opts.recursive !== false, signal: ctx.signal });
      // The first step sends the request: refusals (404, 429, …) surface here, with the id's hints.
      const first = await it.next();
      return { it, first };
    });
    for (let r = events.first; !r.done; r = await events.it.next()) {
      const ev = r.value;
      if (ctx.out.json) ctx.out.line(JSON.stringify(ev));
      else if (ev.type === 'overflow') ctx.out.warn('overflow: the watch could not keep up; changes after this were not seen');
      else ctx.out.line(ev.type === 'rename' ? `rename ${ev.old_path} -> ${ev.path}` : `${ev.type} ${ev.path}`);
      if (ev.type === 'overflow') return EXIT.failure;
    }
    return EXIT.ok;
  },
};

export const filesCommand: CommandSpec = {
  name: 'files',
  summary: 'files in a sandbox: ls, cat, put, get, rm, mv, chmod, stat, glob, watch',
  description: `Remote paths are written ${REMOTE}; - means stdin (put) or stdout (get).`,
  subcommands: [ls, cat, put, get, rm, mv, chmod, statCmd, glob, watchCmd],
};
