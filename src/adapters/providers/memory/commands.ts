/**
 * The in-memory shell's commands: the few a test script needs (echo, printf, cat, head, sleep,
 * pwd, env, test, touch, mkdir, rm, mv, cp, ln -s, ls, chmod, wc, seq, sh) and the shell's own
 * builtins (cd, exit, export, unset, wait, exec). Each works on the runtime's MemoryFs.
 */
import { isSbxError } from '../../../core/errors.js';
import { BrokenPipe, ExitShell, Killed, readAll, type Output } from './io.js';
import { resolvePath } from './fs.js';
import { type CommandContext, type CommandFn, runArgv } from './shell.js';

const enc = new TextEncoder();
const out = (ctx: CommandContext, text: string | Uint8Array) => ctx.io.stdout.write(typeof text === 'string' ? enc.encode(text) : text);
const path = (ctx: CommandContext, p: string) => resolvePath(ctx.proc.cwd, p);

/** Runs `fn`, turning a filesystem refusal into the command's `NAME: message` on stderr and status 1. */
async function fsOp(ctx: CommandContext, fn: () => void | Promise<void>): Promise<number> {
  try {
    await fn();
    return 0;
  } catch (err) {
    if (err instanceof Killed || err instanceof ExitShell || err instanceof BrokenPipe) throw err;
    await ctx.err(`${ctx.argv[0]}: ${(err as Error).message}\n`);
    return 1;
  }
}

/** Splits leading `-abc` flags from operands (`--` ends them). */
function flags(argv: string[]): { set: Set<string>; rest: string[] } {
  const set = new Set<string>();
  let i = 1;
  for (; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      i++;
      break;
    }
    if (!/^-[A-Za-z]+$/.test(a)) break;
    for (const c of a.slice(1)) set.add(c);
  }
  return { set, rest: argv.slice(i) };
}

/** The bytes of a file operand: `-` is stdin, /dev/zero and /dev/null are what they are. */
async function* source(ctx: CommandContext, name: string): AsyncGenerator<Uint8Array> {
  if (name === '-') {
    for (let c = await ctx.io.stdin.read(); c !== null; c = await ctx.io.stdin.read()) yield c;
    return;
  }
  const p = path(ctx, name);
  if (p === '/dev/null') return;
  if (p === '/dev/zero') {
    const zeros = new Uint8Array(64 * 1024);
    for (;;) {
      ctx.proc.kill.check();
      yield zeros;
    }
  }
  yield ctx.proc.fs.readFile(p);
}

async function headCommand(ctx: CommandContext): Promise<number> {
  const args = ctx.argv.slice(1);
  let bytes: number | null = null;
  let lines = 10;
  const files: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (a === '-c' || a === '-n') {
      const n = Number(args[++i]);
      if (!Number.isInteger(n) || n < 0) return ctx.err(`head: invalid number ${args[i]}\n`).then(() => 1);
      if (a === '-c') bytes = n;
      else lines = n;
    } else files.push(a);
  }
  let left = bytes ?? lines;
  try {
    for await (const chunk of source(ctx, files[0] ?? '-')) {
      if (left <= 0) break;
      let take = chunk.byteLength;
      if (bytes !== null) take = Math.min(take, left);
      else {
        let seen = 0;
        take = chunk.byteLength;
        for (let i = 0; i < chunk.byteLength; i++) {
          if (chunk[i] === 0x0a && ++seen === left) {
            take = i + 1;
            break;
          }
        }
        left -= seen;
        await out(ctx, chunk.subarray(0, take));
        continue;
      }
      left -= take;
      await out(ctx, chunk.subarray(0, take));
    }
  } catch (err) {
    if (!isSbxError(err)) throw err;
    await ctx.err(`head: ${(err as Error).message}\n`);
    return 1;
  }
  return 0;
}

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', '\\': '\\', e: '\x1b' };

function unescape(s: string): { text: string; stop: boolean } {
  let text = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '\\' || i + 1 >= s.length) {
      text += s[i];
      continue;
    }
    const c = s[++i]!;
    if (c === 'c') return { text, stop: true };
    if (c === '0' || /[1-7]/.test(c)) {
      const m = /^[0-7]{1,3}/.exec(s.slice(c === '0' ? i + 1 : i))!;
      text += String.fromCharCode(parseInt(m?.[0] || '0', 8));
      i += (c === '0' ? 0 : -1) + (m?.[0].length ?? 0);
    } else text += ESCAPES[c] ?? `\\${c}`;
  }
  return { text, stop: false };
}

/** POSIX printf: %s %b %d %i %u %o %x %X %c %%, flags and width; the format is reused while operands remain. */
function printf(format: string, args: string[]): string {
  let result = '';
  let i = 0;
  do {
    const start = i;
    let stop = false;
    const body = format.replace(
      /%([-+ 0#]*)(\d*)(?:\.(\d+))?([sbdiuoxXc%])|\\(?:[0-7]{1,3}|.)/g,
      (m, fl: string, width: string, prec, conv) => {
        if (stop) return '';
        if (m.startsWith('\\')) return unescape(m).text;
        if (conv === '%') return '%';
        const arg = args[i++] ?? '';
        let s: string;
        if (conv === 's') s = prec !== undefined ? arg.slice(0, Number(prec)) : arg;
        else if (conv === 'b') {
          const u = unescape(arg);
          stop = u.stop;
          s = u.text;
        } else if (conv === 'c') s = arg.slice(0, 1);
        else {
          const n = arg === '' ? 0 : Number.parseInt(arg, /^0x/i.test(arg) ? 16 : 10) || 0;
          s = conv === 'o' ? n.toString(8) : conv === 'x' ? n.toString(16) : conv === 'X' ? n.toString(16).toUpperCase() : String(n);
        }
        const w = Number(width || 0);
        if (s.length >= w) return s;
        if (fl.includes('-')) return s.padEnd(w);
        return fl.includes('0') && !/[sbc]/.test(conv) ? s.padStart(w, '0') : s.padStart(w);
      },
    );
    result += body;
    if (stop || i === start) break;
  } while (i < args.length);
  return result;
}

function testExpr(ctx: CommandContext, a: string[]): boolean {
  if (a[0] === '!') return !testExpr(ctx, a.slice(1));
  if (a.length === 0) return false;
  if (a.length === 1) return a[0] !== '';
  if (a.length === 2) {
    const [op, v] = a as [string, string];
    const node = () => ctx.proc.fs.lookup(path(ctx, v));
    if (op === '-z') return v === '';
    if (op === '-n') return v !== '';
    if (op === '-e') return node() !== undefined;
    if (op === '-f') return node()?.kind === 'file';
    if (op === '-d') return node()?.kind === 'dir';
    if (op === '-x') return ((node()?.mode ?? 0) & 0o111) !== 0;
    if (op === '-s') return ((node() as { data?: Uint8Array } | undefined)?.data?.byteLength ?? 0) > 0;
    return false;
  }
  const [l, op, r] = a as [string, string, string];
  const nums = () => [Number(l), Number(r)] as const;
  switch (op) {
    case '=':
    case '==':
      return l === r;
    case '!=':
      return l !== r;
    case '-eq':
      return nums()[0] === nums()[1];
    case '-ne':
      return nums()[0] !== nums()[1];
    case '-lt':
      return nums()[0] < nums()[1];
    case '-le':
      return nums()[0] <= nums()[1];
    case '-gt':
      return nums()[0] > nums()[1];
    case '-ge':
      return nums()[0] >= nums()[1];
  }
  return false;
}

/** Seconds as `sleep` takes them: `1`, `0.5`, `2s`, `1m`. */
function seconds(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?|\.\d+)([smhd]?)$/.exec(text);
  if (!m) return null;
  return Number(m[1]) * { '': 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2] as '' | 's' | 'm' | 'h' | 'd'];
}

async function copyOut(ctx: CommandContext, files: string[], to: Output = ctx.io.stdout): Promise<number> {
  let status = 0;
  for (const f of files.length > 0 ? files : ['-']) {
    try {
      for await (const chunk of source(ctx, f)) await to.write(chunk);
    } catch (err) {
      if (!isSbxError(err)) throw err;
      await ctx.err(`cat: ${f}: ${(err as Error).message}\n`);
      status = 1;
    }
  }
  return status;
}

export const COMMANDS: Record<string, CommandFn> = {
  ':': async () => 0,
  true: async () => 0,
  false: async () => 1,
  echo: async (ctx) => {
    let args = ctx.argv.slice(1);
    let newline = true;
    let escapes = false;
    while (args[0] && /^-[neE]+$/.test(args[0])) {
      if (args[0].includes('n')) newline = false;
      if (args[0].includes('e')) escapes = true;
      args = args.slice(1);
    }
    const text = args.join(' ');
    const u = escapes ? unescape(text) : { text, stop: false };
    await out(ctx, u.text + (newline && !u.stop ? '\n' : ''));
    return 0;
  },
  printf: async (ctx) => {
    if (ctx.argv.length < 2) return ctx.err('printf: usage: printf FORMAT [ARGUMENT...]\n').then(() => 2);
    await out(ctx, printf(ctx.argv[1]!, ctx.argv.slice(2)));
    return 0;
  },
  cat: (ctx) => copyOut(ctx, ctx.argv.slice(1)),
  head: headCommand,
  pwd: async (ctx) => out(ctx, `${ctx.proc.cwd}\n`).then(() => 0),
  env: async (ctx) => {
    if (ctx.argv.length > 1) return ctx.err('env: only the listing form is supported\n').then(() => 2);
    await out(ctx, [...ctx.proc.env].map(([k, v]) => `${k}=${v}\n`).join(''));
    return 0;
  },
  sleep: async (ctx) => {
    const s = seconds(ctx.argv[1] ?? '');
    if (s === null) return ctx.err(`sleep: invalid time interval ${JSON.stringify(ctx.argv[1] ?? '')}\n`).then(() => 1);
    await ctx.proc.kill.sleep(s * 1000);
    return 0;
  },
  test: async (ctx) => (testExpr(ctx, ctx.argv.slice(1)) ? 0 : 1),
  '[': async (ctx) => {
    if (ctx.argv[ctx.argv.length - 1] !== ']') return ctx.err('[: missing ]\n').then(() => 2);
    return testExpr(ctx, ctx.argv.slice(1, -1)) ? 0 : 1;
  },
  touch: (ctx) =>
    fsOp(ctx, () => {
      for (const f of ctx.argv.slice(1)) {
        const p = path(ctx, f);
        const existing = ctx.proc.fs.lookup(p);
        if (existing?.kind === 'file') existing.mtime = Date.now();
        else if (existing === undefined) ctx.proc.fs.writeFile(p, new Uint8Array(), undefined);
      }
    }),
  mkdir: (ctx) =>
    fsOp(ctx, () => {
      const { set, rest } = flags(ctx.argv);
      for (const d of rest) {
        const p = path(ctx, d);
        if (!set.has('p') && ctx.proc.fs.lookup(p) !== undefined) throw new Error(`${d}: File exists`);
        if (!set.has('p') && ctx.proc.fs.lookup(p.slice(0, p.lastIndexOf('/')) || '/') === undefined)
          throw new Error(`${d}: No such file or directory`);
        ctx.proc.fs.mkdirs(p);
      }
    }),
  rm: (ctx) =>
    fsOp(ctx, () => {
      const { set, rest } = flags(ctx.argv);
      for (const f of rest) {
        const p = path(ctx, f);
        if (ctx.proc.fs.lookup(p, false) === undefined) {
          if (set.has('f')) continue;
          throw new Error(`${f}: No such file or directory`);
        }
        if (ctx.proc.fs.lookup(p, false)?.kind === 'dir' && !set.has('r') && !set.has('R')) throw new Error(`${f}: is a directory`);
        ctx.proc.fs.deleteFile(p, true);
      }
    }),
  mv: (ctx) => fsOp(ctx, () => ctx.proc.fs.moveFile(path(ctx, ctx.argv[1] ?? ''), path(ctx, ctx.argv[2] ?? ''))),
  cp: (ctx) =>
    fsOp(ctx, () => {
      const from = path(ctx, ctx.argv[1] ?? '');
      ctx.proc.fs.writeFile(path(ctx, ctx.argv[2] ?? ''), ctx.proc.fs.readFile(from), ctx.proc.fs.lookup(from)?.mode);
    }),
  ln: (ctx) =>
    fsOp(ctx, () => {
      const { set, rest } = flags(ctx.argv);
      if (!set.has('s') || rest.length !== 2) throw new Error('only ln -s TARGET LINK is supported');
      ctx.proc.fs.symlink(rest[0]!, path(ctx, rest[1]!));
    }),
  chmod: (ctx) =>
    fsOp(ctx, () => {
      const mode = ctx.argv[1] ?? '';
      if (!/^[0-7]{1,4}$/.test(mode)) throw new Error(`only octal modes are supported: ${mode}`);
      for (const f of ctx.argv.slice(2)) ctx.proc.fs.chmod(path(ctx, f), parseInt(mode, 8));
    }),
  ls: (ctx) =>
    fsOp(ctx, async () => {
      const { set, rest } = flags(ctx.argv);
      for (const d of rest.length > 0 ? rest : ['.']) {
        const names = ctx.proc.fs.listFiles(path(ctx, d)).map((f) => f.name);
        await out(ctx, (set.has('a') ? ['.', '..', ...names] : names).map((n) => `${n}\n`).join(''));
      }
    }),
  wc: async (ctx) => {
    const { set } = flags(ctx.argv);
    const data = await readAll(ctx.io.stdin);
    const lines = data.reduce((n, b) => n + (b === 0x0a ? 1 : 0), 0);
    await out(ctx, `${set.has('l') ? lines : data.byteLength}\n`);
    return 0;
  },
  seq: async (ctx) => {
    const [a, b] = ctx.argv.length > 2 ? [Number(ctx.argv[1]), Number(ctx.argv[2])] : [1, Number(ctx.argv[1])];
    const lines: string[] = [];
    for (let i = a; i <= b; i++) lines.push(`${i}\n`);
    await out(ctx, lines.join(''));
    return 0;
  },
  sh: async (ctx) => {
    const args = ctx.argv.slice(1);
    if (args[0] === '-c') return ctx.runScript(args[1] ?? '', [args[2] ?? 'sh', ...args.slice(3)], ctx.io);
    if (args.length === 0) return ctx.runScript(Buffer.from(await readAll(ctx.io.stdin)).toString('utf8'), ['sh'], ctx.io);
    return fsOp(ctx, async () => {
      const code = await ctx.runScript(Buffer.from(ctx.proc.fs.readFile(path(ctx, args[0]!))).toString('utf8'), args, ctx.io);
      if (code !== 0) throw new ExitShell(code);
    }).catch((err: unknown) => {
      if (err instanceof ExitShell) return err.code;
      throw err;
    });
  },
  // The shell's own builtins: they change the shell that runs them.
  cd: (ctx) =>
    fsOp(ctx, () => {
      const p = path(ctx, ctx.argv[1] ?? ctx.proc.env.get('HOME') ?? '/');
      if (ctx.proc.fs.lookup(p)?.kind !== 'dir') throw new Error(`can't cd to ${ctx.argv[1]}`);
      ctx.proc.cwd = p;
      ctx.proc.env.set('PWD', p);
    }),
  exit: async (ctx) => {
    throw new ExitShell(ctx.argv[1] === undefined ? ctx.proc.status : Number(ctx.argv[1]) & 0xff);
  },
  export: async (ctx) => {
    for (const a of ctx.argv.slice(1)) {
      const eq = a.indexOf('=');
      if (eq > 0) ctx.proc.env.set(a.slice(0, eq), a.slice(eq + 1));
    }
    return 0;
  },
  unset: async (ctx) => {
    for (const a of ctx.argv.slice(1)) ctx.proc.env.delete(a);
    return 0;
  },
  set: async () => 0,
  shift: async (ctx) => {
    ctx.proc.args.splice(1, Number(ctx.argv[1] ?? 1));
    return 0;
  },
  wait: async (ctx) => {
    let status = 0;
    for (const job of ctx.proc.jobs.splice(0)) status = await ctx.proc.kill.race(job);
    return status;
  },
  exec: async (ctx) => {
    if (ctx.argv.length < 2) return 0;
    throw new ExitShell(await runArgv(ctx.proc, ctx.argv.slice(1), ctx.io));
  },
};
