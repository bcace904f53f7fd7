/**
 * Commands are data: name, summary, args, options, and a `run(ctx, opts)` handler. The registry
 * builds the commander program, help, shell completions and the man page from this one tree.
 */
import type { CliContext } from './context.js';

/**
 * How an option value is parsed (at parse time, so a bad value is a usage error, exit 2):
 * `int` (non-negative integer), `duration` (`30s`, `5m`), `kv` (repeatable `K=V` → object),
 * `list` (repeatable, commas split), `string`, `boolean` (a flag without value).
 */
export type OptionKind = 'string' | 'int' | 'duration' | 'boolean' | 'kv' | 'list';

export interface OptionSpec {
  /** Commander flags, e.g. `-n, --lines <count>` or `--all-expired`. */
  flags: string;
  description: string;
  kind?: OptionKind;
  default?: string | number | boolean;
  choices?: readonly string[];
  /** Completion hint for the value: local files, or a fixed word list from `choices`. */
  complete?: 'file' | 'dir';
}

export interface ArgSpec {
  name: string;
  description: string;
  required?: boolean;
  variadic?: boolean;
  /** Completion hint: `file` completes local paths; `choices` completes words. */
  complete?: 'file';
  choices?: readonly string[];
}

// `any`: each command declares its own option shape; commander fills it from the spec.
export type RunFn = (ctx: CliContext, opts: any) => Promise<number>;

export interface CommandSpec {
  name: string;
  summary: string;
  /** Longer text for help and the man page. */
  description?: string;
  aliases?: readonly string[];
  args?: readonly ArgSpec[];
  options?: readonly OptionSpec[];
  examples?: readonly string[];
  subcommands?: readonly CommandSpec[];
  /**
   * Like `docker exec`: options only before the first argument; everything from the first argument
   * on is taken verbatim (sbx's global options are accepted before it too).
   */
  passThrough?: boolean;
  /** Usage line after the command path (default: commander's `[options] <arg>…`), shown in help and usage errors. */
  usage?: string;
  /** Exit code for usage errors of this command (default 2; `sbx exec` uses 125). */
  usageExitCode?: number;
  /** True when the command never talks to the server (the client profile is not read). */
  offline?: boolean;
  /**
   * True when SIGINT/SIGTERM are the command's normal way to stop (serve drains and exits 0): its
   * own exit code stands. Otherwise a run ended by a signal exits 128 + the signal number.
   */
  stopsOnSignal?: boolean;
  /**
   * The handler; `opts` holds the parsed options plus the positional args by name. It gets
   * everything through `ctx` and never touches `process`.
   */
  run?: RunFn;
}

/** Long option name of a flags string (`-n, --lines <count>` → `lines`). */
export function longName(flags: string): string {
  const m = /--(?:no-)?([a-z0-9-]+)/.exec(flags);
  return m ? m[1]! : flags;
}

/** Whether the option takes a value. */
export function takesValue(flags: string): boolean {
  return /[<[]/.test(flags);
}
