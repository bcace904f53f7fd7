/**
 * Builds the commander program from the command tree. Option values are parsed here so a bad value
 * is a usage error; the action only records which command to run — main runs it, so the exit code
 * comes back as a value instead of a process exit.
 */
import { Argument, Command, CommanderError, InvalidArgumentError, Option } from 'commander';
import { VERSION } from '../../version.js';
import { UsageError } from './errors.js';
import { EXIT_STATUS_DOC } from './exit-codes.js';
import { parseCount, parseDurationFlag, parseKeyValue } from './shared/parse.js';
import { longName, type CommandSpec, type OptionSpec } from './spec.js';

export interface Selected {
  spec: CommandSpec;
  /** Full command path, e.g. ['files', 'put']. */
  path: string[];
  opts: Record<string, unknown>;
  globals: Record<string, unknown>;
}

export const GLOBAL_OPTIONS: readonly OptionSpec[] = [
  { flags: '--url <url>', description: 'server URL (env SBX_URL; default http://127.0.0.1:7423)' },
  { flags: '--api-key <key>', description: 'API key, sent as X-API-Key (env SBX_API_KEY)' },
  { flags: '--admin-key <key>', description: 'admin API key for admin routes (env SBX_ADMIN_API_KEY)' },
  { flags: '--user <id>', description: 'owner / tenant id, sent as X-User-ID (env SBX_USER_ID)' },
  { flags: '--json', description: 'print the API JSON instead of human output' },
  { flags: '--no-color', description: 'disable colours (also NO_COLOR)' },
];

function wrapParser<T>(fn: (raw: string) => T): (raw: string) => T {
  return (raw) => {
    try {
      return fn(raw);
    } catch (err) {
      if (err instanceof UsageError) throw new InvalidArgumentError(err.message.replace(/^--?[\w-]+ /, ''));
      throw err;
    }
  };
}

/** Commander Option for an OptionSpec, with the value parser of its kind. */
export function toOption(spec: OptionSpec): Option {
  const opt = new Option(spec.flags, spec.description);
  const flag = `--${longName(spec.flags)}`;
  if (spec.choices) opt.choices(spec.choices);
  switch (spec.kind) {
    case 'int':
      opt.argParser(wrapParser((raw) => parseCount(raw, flag)));
      break;
    case 'duration':
      opt.argParser(wrapParser((raw) => parseDurationFlag(raw, flag)));
      break;
    case 'kv':
      opt.argParser((raw: string, prev: Record<string, string> | undefined) => {
        const [k, v] = wrapParser((r) => parseKeyValue(r, flag))(raw);
        return { ...(prev ?? {}), [k]: v };
      });
      break;
    case 'list':
      opt.argParser((raw: string, prev: string[] | undefined) => [
        ...(prev ?? []),
        ...raw
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      ]);
      break;
    default:
      break;
  }
  if (spec.default !== undefined) opt.default(spec.default);
  return opt;
}

function argToken(a: NonNullable<CommandSpec['args']>[number]): string {
  const inner = `${a.name}${a.variadic ? '...' : ''}`;
  return a.required ? `<${inner}>` : `[${inner}]`;
}

/** Commander's name for an option's value (`--no-color` → `color`, `--api-key` → `apiKey`). */
const attribute = (o: OptionSpec) => toOption(o).attributeName();

/**
 * The root command. Global options may come anywhere on the line, except for pass-through commands
 * (`sbx exec`): there the root stops parsing at the command's name and the command takes its own
 * options (and copies of the global ones) up to its first argument, and the rest verbatim.
 */
class RootCommand extends Command {
  readonly passThrough = new Set<string>();

  override parseOptions(args: string[]): { operands: string[]; unknown: string[] } {
    const self = this as unknown as { _enablePositionalOptions: boolean };
    if (this.passThrough.size > 0) {
      self._enablePositionalOptions = true;
      try {
        const positional = super.parseOptions(args);
        if (positional.operands.length > 0 && this.passThrough.has(positional.operands[0]!)) return positional;
      } finally {
        self._enablePositionalOptions = false;
      }
    }
    return super.parseOptions(args);
  }
}

function addCommand(parent: Command, spec: CommandSpec, path: string[], onSelect: (s: Selected) => void): void {
  const cmd = new Command(spec.name)
    .description(spec.description ? `${spec.summary}\n\n${spec.description}` : spec.summary)
    .summary(spec.summary);
  if (spec.usage) cmd.usage(spec.usage);
  for (const alias of spec.aliases ?? []) cmd.alias(alias);
  for (const a of spec.args ?? []) {
    const arg = new Argument(argToken(a), a.description);
    if (a.choices) arg.choices(a.choices);
    cmd.addArgument(arg);
  }
  for (const o of spec.options ?? []) cmd.addOption(toOption(o));
  if (spec.passThrough) {
    // Global options given after the command's name (`sbx exec --json ID …`), hidden from its help.
    for (const o of GLOBAL_OPTIONS) cmd.addOption(toOption(o).hideHelp());
    cmd.passThroughOptions();
    if (parent instanceof RootCommand) for (const n of [spec.name, ...(spec.aliases ?? [])]) parent.passThrough.add(n);
  }
  if (spec.examples && spec.examples.length > 0) {
    cmd.addHelpText('after', `\nExamples:\n${spec.examples.map((e) => `  ${e}`).join('\n')}\n`);
  }
  const full = [...path, spec.name];
  for (const sub of spec.subcommands ?? []) addCommand(cmd, sub, full, onSelect);
  if (spec.run) {
    cmd.action((...params: unknown[]) => {
      const self = params[params.length - 1] as Command;
      const opts: Record<string, unknown> = { ...self.opts() };
      (spec.args ?? []).forEach((a, i) => {
        opts[a.name] = params[i];
      });
      const globals: Record<string, unknown> = self.optsWithGlobals();
      // An option on the line belongs to the deepest command that declares it: a parent declaring
      // the same flag (`sbx worker --config` above `sbx worker token mint --config`) takes it first.
      for (const o of spec.options ?? []) {
        const key = attribute(o);
        if (self.getOptionValueSource(key) === 'cli') continue;
        for (let p = self.parent; p; p = p.parent) {
          if (p.getOptionValueSource(key) === 'cli') {
            opts[key] = p.getOptionValue(key);
            break;
          }
        }
      }
      if (spec.passThrough) {
        for (const o of GLOBAL_OPTIONS) {
          const key = attribute(o);
          if (self.getOptionValueSource(key) === 'cli') globals[key] = self.getOptionValue(key);
        }
      }
      onSelect({ spec, path: full, opts, globals });
    });
  }
  parent.addCommand(cmd);
}

export interface ProgramIo {
  writeOut(s: string): void;
  writeErr(s: string): void;
  columns?: number;
}

/** The commander program for `commands`; `onSelect` receives the command to run. */
export function buildProgram(commands: readonly CommandSpec[], io: ProgramIo, onSelect: (s: Selected) => void): Command {
  const program = new RootCommand('sbx')
    .description('sbx — self-hosted control plane for disposable execution sandboxes')
    .version(VERSION, '-V, --version', 'print the version')
    .helpOption('-h, --help', 'show help')
    .helpCommand('help [command]', 'show help for a command')
    .showSuggestionAfterError(true)
    .configureHelp({ showGlobalOptions: true, helpWidth: io.columns && io.columns > 40 ? io.columns : 100 })
    .configureOutput({
      writeOut: io.writeOut,
      writeErr: io.writeErr,
      // One line: `sbx: unknown option '--x' (Did you mean --y?)`.
      outputError: (str, write) =>
        write(
          `sbx: ${str
            .replace(/^error:\s*/i, '')
            .replace(/\s*\n\s*/g, ' ')
            .trim()}\n`,
        ),
    })
    .exitOverride();
  for (const o of GLOBAL_OPTIONS) program.addOption(toOption(o));
  program.addHelpText(
    'after',
    `\nExit status:\n${EXIT_STATUS_DOC.map(([c, d]) => `  ${String(c).padEnd(6)}${d}`).join('\n')}\n\nRun 'sbx ` +
      `<command> --help' for the options of a command.\n`,
  );
  // Commander checks at addCommand that a pass-through command's parent parses positionally; the
  // root does so only for those commands (RootCommand.parseOptions).
  program.enablePositionalOptions(true);
  for (const spec of commands) addCommand(program, spec, [], onSelect);
  program.enablePositionalOptions(false);
  const specs = new Map<Command, CommandSpec>();
  const index = (cmd: Command, list: readonly CommandSpec[]) => {
    for (const spec of list) {
      const sub = cmd.commands.find((c) => c.name() === spec.name);
      if (!sub) continue;
      specs.set(sub, spec);
      index(sub, spec.subcommands ?? []);
    }
  };
  index(program, commands);
  const pathOf = (cmd: Command): string => (cmd.parent ? `${pathOf(cmd.parent)} ${cmd.name()}` : cmd.name());
  // Every subcommand inherits the overrides (commander copies settings at creation time only).
  const apply = (cmd: Command) => {
    const spec = specs.get(cmd);
    const usageExit = spec?.usageExitCode;
    cmd.exitOverride(
      usageExit === undefined
        ? undefined
        : (err) => {
            if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help') throw err;
            throw Object.assign(new CommanderError(usageExit, err.code, err.message), { sbxExitCode: usageExit });
          },
    );
    cmd.helpOption('-h, --help', 'show help');
    const base = program.configureOutput();
    // A usage error of a command that runs shows its right form: `sbx: <error> (usage: sbx files cat SANDBOX_ID:/path)`.
    const leaf = cmd.commands.length === 0;
    cmd.configureOutput({
      ...base,
      outputError: (str, write) =>
        write(
          `sbx: ${str
            .replace(/^error:\s*/i, '')
            .replace(/\s*\n\s*/g, ' ')
            .trim()}${leaf ? ` (usage: ${pathOf(cmd)} ${cmd.usage()})` : ''}\n`,
        ),
    });
    cmd.showSuggestionAfterError(true);
    cmd.configureHelp({ showGlobalOptions: true, helpWidth: io.columns && io.columns > 40 ? io.columns : 100 });
    cmd.commands.forEach(apply);
  };
  program.commands.forEach(apply);
  return program;
}

/** Exit code for a commander error: help and version are success, everything else is usage. */
export function commanderExit(err: CommanderError): number {
  if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version') return 0;
  return (err as CommanderError & { sbxExitCode?: number }).sbxExitCode ?? 2;
}

export { CommanderError };
