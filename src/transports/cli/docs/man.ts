/** The sbx(1) man page, generated from the command tree (checked in as man/sbx.1). */
import { EXIT_STATUS_DOC } from '../exit-codes.js';
import type { ArgSpec, CommandSpec, OptionSpec } from '../spec.js';

/** Escapes text for roff: backslashes, dashes, and a leading dot or quote. */
export function roff(text: string): string {
  return (
    text
      .replace(/\\/g, '\\e')
      .replace(/-/g, '\\-')
      // troff input is ASCII: other characters go in as \[uXXXX] escapes.
      .replace(/[^\x00-\x7f]/gu, (ch) => `\\[u${ch.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}]`)
      .split('\n')
      .map((l) => (/^[.']/.test(l) ? `\\&${l}` : l))
      .join('\n')
  );
}

function optionItem(o: OptionSpec): string {
  const [flags, value] = o.flags.split(/\s+(?=[<[])/);
  const v = value ? ` \\fI${roff(value.replace(/[<>[\]]/g, ''))}\\fR` : '';
  const extra = o.choices ? ` (one of: ${o.choices.join(', ')})` : '';
  return `.TP\n.B ${roff(flags!)}${v}\n${roff(o.description + extra)}`;
}

function usage(path: string[], spec: CommandSpec): string {
  if (spec.usage) return `sbx ${path.join(' ')} ${spec.usage}`;
  const args = (spec.args ?? []).map((a: ArgSpec) => {
    const inner = `${a.name.toUpperCase()}${a.variadic ? '...' : ''}`;
    return a.required ? inner : `[${inner}]`;
  });
  const opts = (spec.options ?? []).length > 0 ? ['[options]'] : [];
  const parts = [...opts, ...args];
  return `sbx ${path.join(' ')}${parts.length ? ` ${parts.join(' ')}` : ''}`;
}

function section(path: string[], spec: CommandSpec): string[] {
  const out: string[] = [];
  if (spec.run) {
    out.push(`.SS "${roff(usage(path, spec))}"`, roff(spec.summary + '.'));
    if (spec.aliases?.length) out.push('.br', `Alias: ${roff(spec.aliases.join(', '))}.`);
    if (spec.description) out.push('.PP', roff(spec.description));
    for (const a of spec.args ?? []) out.push(`.TP\n.I ${roff(a.name.toUpperCase())}\n${roff(a.description)}`);
    for (const o of spec.options ?? []) out.push(optionItem(o));
    if (spec.examples?.length) out.push('.PP', 'Examples:', '.PP', '.RS 4', '.nf', ...spec.examples.map(roff), '.fi', '.RE');
  } else {
    out.push(`.SS "sbx ${roff(path.join(' '))} COMMAND"`, roff(spec.summary + '.'));
    if (spec.description) out.push('.PP', roff(spec.description));
  }
  for (const sub of spec.subcommands ?? []) out.push(...section([...path, sub.name], sub));
  return out;
}

/** Commands that read a server config file (they take `--config`), by full name: `serve`, `config lint`. */
function configCommands(commands: readonly CommandSpec[], prefix: string[] = []): string[] {
  return commands.flatMap((c) => {
    const path = [...prefix, c.name];
    const own = c.run && (c.options ?? []).some((o) => /--config\b/.test(o.flags)) ? [path.join(' ')] : [];
    return [...own, ...configCommands(c.subcommands ?? [], path)];
  });
}

/** `a`, `a and b`, `a, b and c`. */
function joinWords(words: readonly string[]): string {
  return words.length <= 1 ? (words[0] ?? '') : `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/** The whole man page. */
export function manPage(commands: readonly CommandSpec[], globals: readonly OptionSpec[], version: string): string {
  const lines = [
    `.\\" sbx(1), generated from the command tree by scripts/gen-docs.mjs (npm run gen:docs); do not edit.`,
    `.TH SBX 1 "" "sbx-cli ${roff(version)}" "User Commands"`,
    '.SH NAME',
    'sbx \\- self\\-hosted control plane for disposable execution sandboxes',
    '.SH SYNOPSIS',
    '.B sbx',
    '[\\fIglobal options\\fR] \\fIcommand\\fR [\\fIoptions\\fR] [\\fIarguments\\fR]',
    '.SH DESCRIPTION',
    roff(
      'sbx is one binary: `sbx serve` runs the control plane (HTTP API under /api/v1, store, providers, TTL reaper, event stream), ' +
        (commands.some((c) => c.name === 'worker') ? '`sbx worker` runs a remote worker, ' : '') +
        'and the other commands are clients of the HTTP API. ' +
        'Output is human-readable by default; --json prints the API JSON on stdout. Errors are printed to ' +
        'stderr as one line starting with "sbx:".',
    ),
    '.SH GLOBAL OPTIONS',
    ...globals.map(optionItem),
    '.TP',
    '.B \\-h, \\-\\-help',
    'Show help for sbx or a command.',
    '.TP',
    '.B \\-V, \\-\\-version',
    'Print the version.',
    '.SH COMMANDS',
    ...commands.flatMap((c) => section([c.name], c)),
    '.SH EXIT STATUS',
    ...EXIT_STATUS_DOC.flatMap(([code, text]) => ['.TP', `.B ${code}`, roff(text)]),
    '.SH ENVIRONMENT',
    ...[
      ['SBX_URL', 'server URL (as --url); default http://127.0.0.1:7423'],
      ['SBX_API_KEY', 'API key (as --api-key)'],
      ['SBX_ADMIN_API_KEY', 'admin API key (as --admin-key)'],
      ['SBX_USER_ID', 'owner / tenant id (as --user)'],
      ['SBX_CONFIG', `server configuration file for ${joinWords(configCommands(commands))} (as --config)`],
      ['SVC_*', 'server configuration keys, e.g. SVC_AUTH_API_KEY for auth.api_key'],
      ['NO_COLOR', 'disable colours (as --no-color)'],
    ].flatMap(([k, v]) => ['.TP', `.B ${roff(k!)}`, roff(v!)]),
    '.SH FILES',
    ...[
      ['~/.sbx/client.yaml', 'client profile: url, api_key, admin_key, user (lowest precedence, below flags and environment)'],
      ['~/.sbx/config.yaml', 'server configuration in the home directory'],
      ['sbx.yaml, sbx.yml, sbx.json, .sbxrc*', 'server configuration in the working directory'],
      ['~/.sbx/sbx.db', 'default SQLite store of sbx serve'],
    ].flatMap(([k, v]) => ['.TP', `.I ${roff(k!)}`, roff(v!)]),
    '.SH EXAMPLES',
    '.nf',
    ...[
      'sbx serve &',
      'ID=$(sbx spawn --ttl 10m)',
      "sbx exec $ID -- sh -c 'echo hello'",
      'sbx files put ./app.py $ID:/workspace/',
      'sbx rm $ID',
    ].map(roff),
    '.fi',
  ];
  return `${lines.join('\n')}\n`;
}
