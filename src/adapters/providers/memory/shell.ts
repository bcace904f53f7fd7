/**
 * The in-memory provider's shell: runs the grammar of shell-parse.ts over a MemoryFs, with the
 * commands of commands.ts. No host process is ever started. A `&` job runs concurrently (as a
 * promise) and dies with its exec; `sleep` waits on the timers (fake ones in the unit tier).
 */
import { ExitShell, BrokenPipe, bytesInput, EMPTY_INPUT, Kill, Killed, NULL_OUTPUT, Pipe, type Output, type Streams } from './io.js';
import { type MemoryFs, resolvePath } from './fs.js';
import { type AndOr, type Command, type List, parse, type Pipeline, type Redirect, ShellSyntaxError, type Word } from './shell-parse.js';
import { COMMANDS } from './commands.js';

const enc = new TextEncoder();

/** A shell's state: variables (all exported), directory, positional parameters, jobs. */
export interface Proc {
  fs: MemoryFs;
  kill: Kill;
  env: Map<string, string>;
  cwd: string;
  /** `$0`, `$1`, … */
  args: string[];
  status: number;
  io: Streams;
  jobs: Array<Promise<number>>;
}

/** What a command gets: its argv, the shell's state and its streams. */
export interface CommandContext {
  argv: string[];
  proc: Proc;
  io: Streams;
  /** Writes text to stderr. */
  err(text: string): Promise<void>;
  /** Runs a script in a new shell (sh -c, scripts, `exec`). */
  runScript(script: string, args: string[], io: Streams): Promise<number>;
}

export type CommandFn = (ctx: CommandContext) => Promise<number>;

/** Shell builtins that change the shell itself, looked up before any file. */
const SPECIAL = new Set(['cd', 'exit', 'export', 'unset', 'wait', 'exec', 'set', ':', 'shift', 'true', 'false']);

export function subshell(proc: Proc, io: Streams = proc.io): Proc {
  return { ...proc, env: new Map(proc.env), io, jobs: [] };
}

/** Runs a whole script in `proc`; the status it ends with (`exit N`, or the last command's). */
export async function runScript(proc: Proc, script: string): Promise<number> {
  let list: List;
  try {
    list = parse(script);
  } catch (err) {
    if (!(err instanceof ShellSyntaxError)) throw err;
    await proc.io.stderr.write(enc.encode(`sh: syntax error: ${err.message}\n`));
    return 2;
  }
  try {
    return await runList(proc, list);
  } catch (err) {
    if (err instanceof ExitShell) return err.code;
    throw err;
  }
}

async function runList(proc: Proc, list: List): Promise<number> {
  for (const { andOr, background } of list.items) {
    proc.kill.check();
    if (background) {
      const job = subshell(proc);
      proc.jobs.push(
        runAndOr(job, andOr).catch((err: unknown) => (err instanceof ExitShell ? err.code : err instanceof Killed ? err.code : 1)),
      );
      proc.status = 0;
    } else {
      proc.status = await runAndOr(proc, andOr);
    }
  }
  return proc.status;
}

async function runAndOr(proc: Proc, ao: AndOr): Promise<number> {
  let status = await runPipeline(proc, ao.first);
  for (const [op, pl] of ao.rest) {
    if ((op === '&&') === (status === 0)) status = await runPipeline(proc, pl);
  }
  proc.status = status;
  return status;
}

async function runPipeline(proc: Proc, pl: Pipeline): Promise<number> {
  let status: number;
  if (pl.cmds.length === 1) {
    status = await runCommand(proc, pl.cmds[0]!, proc.io);
  } else {
    // Each stage in a subshell of its own, all at once, joined by bounded pipes.
    const pipes = pl.cmds.slice(1).map(() => new Pipe(proc.kill));
    const stages = pl.cmds.map(async (cmd, i) => {
      const io: Streams = { stdin: i === 0 ? proc.io.stdin : pipes[i - 1]!, stdout: pipes[i] ?? proc.io.stdout, stderr: proc.io.stderr };
      try {
        return await runCommand(subshell(proc, io), cmd, io);
      } catch (err) {
        if (err instanceof BrokenPipe) return 141;
        if (err instanceof ExitShell) return err.code;
        throw err;
      } finally {
        pipes[i]?.close();
        pipes[i - 1]?.abandon();
      }
    });
    const all = await Promise.all(stages);
    status = all[all.length - 1]!;
  }
  return pl.negate ? (status === 0 ? 1 : 0) : status;
}

async function runCommand(proc: Proc, cmd: Command, io: Streams): Promise<number> {
  proc.kill.check();
  const redirected = await applyRedirects(proc, cmd.redirs, io);
  if (redirected === null) return 1;
  switch (cmd.type) {
    case 'simple':
      return runSimple(proc, cmd, redirected);
    case 'group': {
      const saved = proc.io;
      proc.io = redirected;
      try {
        return await runList(proc, cmd.body);
      } finally {
        proc.io = saved;
      }
    }
    case 'subshell':
      try {
        return await runList(subshell(proc, redirected), cmd.body);
      } catch (err) {
        if (err instanceof ExitShell) return err.code;
        throw err;
      }
    case 'if': {
      const inner = { ...proc, io: redirected };
      for (const [cond, body] of cmd.clauses) {
        if ((await runList(inner, cond)) === 0) return runList(inner, body);
      }
      return cmd.otherwise ? runList(inner, cmd.otherwise) : 0;
    }
    case 'for': {
      const inner = { ...proc, io: redirected };
      const items = cmd.items.length > 0 ? cmd.items.flatMap((w) => expandWord(proc, w)) : proc.args.slice(1);
      let status = 0;
      for (const item of items) {
        proc.env.set(cmd.name, item);
        status = await runList(inner, cmd.body);
      }
      return status;
    }
    case 'while': {
      const inner = { ...proc, io: redirected };
      let status = 0;
      while (((await runList(inner, cmd.cond)) === 0) !== cmd.until) status = await runList(inner, cmd.body);
      return status;
    }
  }
}

async function runSimple(proc: Proc, cmd: Extract<Command, { type: 'simple' }>, io: Streams): Promise<number> {
  const argv = cmd.words.flatMap((w) => expandWord(proc, w));
  const assigns = cmd.assigns.map(([k, w]) => [k, expandWord(proc, w, false).join('')] as const);
  if (argv.length === 0) {
    for (const [k, v] of assigns) proc.env.set(k, v);
    return 0;
  }
  const env = new Map(proc.env);
  for (const [k, v] of assigns) env.set(k, v);
  return runArgv(assigns.length > 0 && !SPECIAL.has(argv[0]!) ? { ...proc, env } : proc, argv, io);
}

/**
 * Runs one command by name: a special builtin, else a file found by path or on PATH (a script),
 * else a built-in program; 127 `sbx: command not found: NAME`, 126 `sbx: permission denied: NAME`.
 */
export async function runArgv(proc: Proc, argv: string[], io: Streams): Promise<number> {
  const name = argv[0]!;
  const ctx: CommandContext = {
    argv,
    proc,
    io,
    err: (text) => io.stderr.write(enc.encode(text)),
    runScript: (script, args, sio) => runScript({ ...subshell(proc, sio), args }, script),
  };
  const builtin = COMMANDS[name];
  if (SPECIAL.has(name) && builtin) return builtin(ctx);
  const found = findProgram(proc, name);
  if (found.kind === 'script') {
    const text = Buffer.from(proc.fs.readFile(found.path)).toString('utf8');
    const body = text.startsWith('#!') ? text.slice(text.indexOf('\n') + 1 || text.length) : text;
    return runScript({ ...subshell(proc, io), args: [name, ...argv.slice(1)] }, body);
  }
  if (found.kind === 'none' && builtin) return builtin(ctx);
  await ctx.err(found.kind === 'denied' ? `sbx: permission denied: ${name}\n` : `sbx: command not found: ${name}\n`);
  return found.kind === 'denied' ? 126 : 127;
}

type Found = { kind: 'script'; path: string } | { kind: 'denied' } | { kind: 'none' } | { kind: 'missing' };

function findProgram(proc: Proc, name: string): Found {
  const probe = (path: string): Found => {
    const node = proc.fs.lookup(path);
    if (node === undefined) return { kind: 'none' };
    if (node.kind !== 'file' || (node.mode & 0o111) === 0) return { kind: 'denied' };
    return { kind: 'script', path };
  };
  if (name.includes('/')) {
    const found = probe(resolvePath(proc.cwd, name));
    return found.kind === 'none' ? { kind: 'missing' } : found;
  }
  let denied = false;
  for (const dir of (proc.env.get('PATH') ?? '').split(':')) {
    const found = probe(resolvePath(proc.cwd, `${dir || '.'}/${name}`));
    if (found.kind === 'script') return found;
    if (found.kind === 'denied') denied = true;
  }
  return denied && !COMMANDS[name] ? { kind: 'denied' } : { kind: 'none' };
}

async function applyRedirects(proc: Proc, redirs: Redirect[], io: Streams): Promise<Streams | null> {
  const fds: Array<Streams['stdin'] | Output> = [io.stdin, io.stdout, io.stderr];
  for (const r of redirs) {
    const target = expandWord(proc, r.target, false).join('');
    if (r.fd > 2) continue;
    if (r.op === '>&') {
      const from = Number(target);
      if (target === '-' || !(from >= 0 && from <= 2)) continue;
      fds[r.fd] = fds[from]!;
      continue;
    }
    const path = resolvePath(proc.cwd, target);
    try {
      if (r.op === '<') {
        fds[r.fd] = path === '/dev/null' ? EMPTY_INPUT : bytesInput(proc.fs.readFile(path));
      } else if (path === '/dev/null') {
        fds[r.fd] = NULL_OUTPUT;
      } else {
        if (r.op === '>') proc.fs.writeFile(path, new Uint8Array(), undefined);
        else if (proc.fs.lookup(path) === undefined) proc.fs.writeFile(path, new Uint8Array(), undefined);
        fds[r.fd] = { write: async (chunk) => proc.fs.writeFile(path, chunk, undefined, { append: true }) };
      }
    } catch (err) {
      await io.stderr.write(enc.encode(`sh: cannot open ${target}: ${(err as Error).message}\n`));
      return null;
    }
  }
  return { stdin: fds[0] as Streams['stdin'], stdout: fds[1] as Output, stderr: fds[2] as Output };
}

/** Expands a word to fields: variables, then field splitting of unquoted expansions (when `split`). */
export function expandWord(proc: Proc, word: Word, split = true): string[] {
  const fields: string[] = [];
  let cur = '';
  let has = false;
  for (const part of word) {
    if (part.q === 'sq') {
      cur += part.text;
      has = true;
    } else if (part.q === 'dq') {
      cur += expandText(proc, part.text, true);
      has = true;
    } else {
      const text = expandText(proc, part.text, false);
      if (!split || !part.text.includes('$')) {
        cur += text;
        has ||= text.length > 0 || !part.text.includes('$');
        continue;
      }
      const pieces = text.split(/[ \t\n]+/);
      pieces.forEach((piece, i) => {
        if (i > 0 && (has || cur.length > 0)) {
          fields.push(cur);
          cur = '';
          has = false;
        }
        cur += piece;
        if (piece.length > 0) has = true;
      });
    }
  }
  if (has || cur.length > 0) fields.push(cur);
  return fields;
}

const VAR = /\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9?#$@*!-]))/g;

function expandText(proc: Proc, text: string, quoted: boolean): string {
  let out = '';
  let last = 0;
  for (let i = 0; i < text.length; i++) {
    if (quoted && text[i] === '\\' && (text[i + 1] === '$' || text[i + 1] === '\\')) {
      out += expandVars(proc, text.slice(last, i)) + text[i + 1];
      last = i + 2;
      i++;
    }
  }
  return out + expandVars(proc, text.slice(last));
}

function expandVars(proc: Proc, text: string): string {
  return text.replace(VAR, (_m, braced: string | undefined, name: string | undefined, special: string | undefined) => {
    if (braced !== undefined) {
      const m = /^([A-Za-z_][A-Za-z0-9_]*|[0-9?#])(?::?-(.*))?$/.exec(braced);
      if (!m) return '';
      const v = lookupVar(proc, m[1]!);
      return v === '' && m[2] !== undefined ? m[2] : v;
    }
    return lookupVar(proc, name ?? special!);
  });
}

function lookupVar(proc: Proc, name: string): string {
  if (name === '?') return String(proc.status);
  if (name === '#') return String(Math.max(0, proc.args.length - 1));
  if (name === '$' || name === '!') return '1';
  if (name === '@' || name === '*') return proc.args.slice(1).join(' ');
  if (name === '-') return '';
  if (/^[0-9]$/.test(name)) return proc.args[Number(name)] ?? '';
  return proc.env.get(name) ?? '';
}
