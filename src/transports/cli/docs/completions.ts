/**
 * Shell completion scripts generated from the command tree (`sbx completion <shell>` and the
 * checked-in files under completions/). Completion follows the command path, offers subcommands,
 * options (global ones everywhere), option value choices, argument choices and local files.
 */
import { shellQuote } from '../../../shared/shell.js';
import { takesValue, type CommandSpec, type OptionSpec } from '../spec.js';

export type Shell = 'bash' | 'zsh' | 'fish';

interface Node {
  path: string;
  spec?: CommandSpec;
  subs: CommandSpec[];
  options: OptionSpec[];
}

const HEADER = 'generated from the command tree by scripts/gen-docs.mjs (npm run gen:docs); do not edit';

function nodes(commands: readonly CommandSpec[], globals: readonly OptionSpec[]): Node[] {
  const out: Node[] = [{ path: '', subs: [...commands], options: [...globals] }];
  const walk = (specs: readonly CommandSpec[], prefix: string) => {
    for (const spec of specs) {
      const path = prefix ? `${prefix} ${spec.name}` : spec.name;
      out.push({ path, spec, subs: [...(spec.subcommands ?? [])], options: [...(spec.options ?? []), ...globals] });
      walk(spec.subcommands ?? [], path);
    }
  };
  walk(commands, '');
  return out;
}

/** Every spelling of an option (`-n`, `--lines`, and `--no-x` for negatable flags). */
function spellings(o: OptionSpec): string[] {
  return o.flags
    .split(/[ ,|]+/)
    .filter((t) => t.startsWith('-'))
    .map((t) => t.trim());
}

function argChoices(spec: CommandSpec | undefined): string[] {
  return (spec?.args ?? []).flatMap((a) => [...(a.choices ?? [])]);
}

function argFiles(spec: CommandSpec | undefined): boolean {
  return (spec?.args ?? []).some((a) => a.complete === 'file');
}

const sq = shellQuote;

function caseArms(list: Node[], value: (n: Node) => string, indent = '    '): string {
  return list
    .map((n) => ({ n, v: value(n) }))
    .filter(({ v }) => v !== '')
    .map(({ n, v }) => `${indent}${sq(n.path)}) echo ${sq(v)} ;;`)
    .join('\n');
}

function bash(list: Node[]): string {
  const valueOpts = (n: Node) =>
    n.options
      .filter((o) => takesValue(o.flags))
      .flatMap(spellings)
      .join(' ');
  const fileOpts = (n: Node) =>
    n.options
      .filter((o) => o.complete === 'file' || o.complete === 'dir')
      .flatMap(spellings)
      .join(' ');
  const choiceArms = list.flatMap((n) =>
    n.options
      .filter((o) => o.choices)
      .flatMap((o) => spellings(o).map((s) => `    ${sq(`${n.path}|${s}`)}) echo ${sq(o.choices!.join(' '))} ;;`)),
  );
  return `# bash completion for sbx — ${HEADER}
# Install: source <(sbx completion bash)   or copy to /etc/bash_completion.d/sbx

_sbx_subs() {
  case "$1" in
${caseArms(list, (n) => n.subs.flatMap((s) => [s.name, ...(s.aliases ?? [])]).join(' '))}
  esac
}

_sbx_opts() {
  case "$1" in
${caseArms(list, (n) => n.options.flatMap(spellings).join(' '))}
  esac
}

${lookupFunctions(list, caseArms(list, valueOpts), caseArms(list, fileOpts), choiceArms)}

_sbx() {
  local cur prev path word i skip=0 subs
  COMPREPLY=()
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  path=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    word="\${COMP_WORDS[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$word" in
      --) return 0 ;;
      -*) [[ " $(_sbx_value_opts "$path") " == *" $word "* ]] && skip=1 ;;
      *)
        subs=" $(_sbx_subs "$path") "
        [[ "$subs" == *" $word "* ]] && path="\${path:+$path }$word"
        ;;
    esac
  done
  if [[ " $(_sbx_value_opts "$path") " == *" $prev "* ]]; then
    local choices
    choices="$(_sbx_opt_choices "$path" "$prev")"
    if [[ -n "$choices" ]]; then
      COMPREPLY=($(compgen -W "$choices" -- "$cur"))
    elif [[ " $(_sbx_file_opts "$path") " == *" $prev "* ]]; then
      COMPREPLY=($(compgen -f -- "$cur"))
    fi
    return 0
  fi
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$(_sbx_opts "$path")" -- "$cur"))
    return 0
  fi
  subs="$(_sbx_subs "$path")"
  if [[ -n "$subs" ]]; then
    COMPREPLY=($(compgen -W "$subs" -- "$cur"))
  elif [[ -n "$(_sbx_arg_words "$path")" ]]; then
    COMPREPLY=($(compgen -W "$(_sbx_arg_words "$path")" -- "$cur"))
  elif [[ -n "$(_sbx_arg_files "$path")" ]]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
  return 0
}

complete -o default -F _sbx sbx
`;
}

const zq = (s: string) => s.replace(/\\/g, '\\\\').replace(/:/g, '\\:').replace(/'/g, `'\\''`);

/** The lookup functions bash and zsh share: options that take values or files, option choices, argument words and files. */
function lookupFunctions(list: Node[], valueArms: string, fileOptArms: string, choiceArms: string[]): string {
  return `_sbx_value_opts() {
  case "$1" in
${valueArms}
  esac
}

_sbx_file_opts() {
  case "$1" in
${fileOptArms}
  esac
}

_sbx_opt_choices() {
  case "$1|$2" in
${choiceArms.join('\n')}
  esac
}

_sbx_arg_words() {
  case "$1" in
${caseArms(list, (n) => argChoices(n.spec).join(' '))}
  esac
}

_sbx_arg_files() {
  case "$1" in
${caseArms(list, (n) => (argFiles(n.spec) ? 'yes' : ''))}
  esac
}`;
}

function zsh(list: Node[]): string {
  const subArms = list
    .filter((n) => n.subs.length > 0)
    .map((n) => `    ${sq(n.path)}) subs=(${n.subs.map((s) => `'${zq(s.name)}:${zq(s.summary)}'`).join(' ')}) ;;`)
    .join('\n');
  const optArms = list
    .map((n) => {
      const specs = n.options.flatMap((o) => spellings(o).map((s) => `'${zq(s)}:${zq(o.description)}'`));
      return `    ${sq(n.path)}) opts=(${specs.join(' ')}) ;;`;
    })
    .join('\n');
  const valueArms = caseArms(list, (n) =>
    n.options
      .filter((o) => takesValue(o.flags))
      .flatMap(spellings)
      .join(' '),
  );
  const choiceArms = list.flatMap((n) =>
    n.options
      .filter((o) => o.choices)
      .flatMap((o) => spellings(o).map((s) => `    ${sq(`${n.path}|${s}`)}) echo ${sq(o.choices!.join(' '))} ;;`)),
  );
  const fileOptArms = caseArms(list, (n) =>
    n.options
      .filter((o) => o.complete)
      .flatMap(spellings)
      .join(' '),
  );
  return `#compdef sbx
# zsh completion for sbx — ${HEADER}
# Install: sbx completion zsh > "\${fpath[1]}/_sbx"

${lookupFunctions(list, valueArms, fileOptArms, choiceArms)}

_sbx() {
  local path="" word i skip=0 cur prev
  local -a subs opts names
  cur="\${words[CURRENT]}"
  prev="\${words[CURRENT-1]}"
  for ((i = 2; i < CURRENT; i++)); do
    word="\${words[i]}"
    if ((skip)); then skip=0; continue; fi
    case "$word" in
      --) _files; return ;;
      -*) [[ " $(_sbx_value_opts "$path") " == *" $word "* ]] && skip=1 ;;
      *)
        subs=()
        case "$path" in
${subArms.replace(/^ {4}/gm, '        ')}
        esac
        names=(\${subs%%:*})
        (( \${names[(Ie)$word]} )) && path="\${path:+$path }$word"
        ;;
    esac
  done
  if [[ " $(_sbx_value_opts "$path") " == *" $prev "* ]]; then
    local choices
    choices="$(_sbx_opt_choices "$path" "$prev")"
    if [[ -n "$choices" ]]; then
      compadd -- \${=choices}
    elif [[ " $(_sbx_file_opts "$path") " == *" $prev "* ]]; then
      _files
    fi
    return
  fi
  if [[ "$cur" == -* ]]; then
    opts=()
    case "$path" in
${optArms.replace(/^ {4}/gm, '      ')}
    esac
    _describe -t options 'option' opts
    return
  fi
  subs=()
  case "$path" in
${subArms.replace(/^ {4}/gm, '    ')}
  esac
  if (( \${#subs} )); then
    _describe -t commands 'command' subs
  elif [[ -n "$(_sbx_arg_words "$path")" ]]; then
    local w
    w="$(_sbx_arg_words "$path")"
    compadd -- \${=w}
  elif [[ -n "$(_sbx_arg_files "$path")" ]]; then
    _files
  fi
}

_sbx "$@"
`;
}

const fq = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function fish(list: Node[]): string {
  const lines: string[] = [
    `# fish completion for sbx — ${HEADER}`,
    '# Install: sbx completion fish > ~/.config/fish/completions/sbx.fish',
    '',
    `set -g __sbx_paths ${list
      .filter((n) => n.path !== '')
      .map((n) => fq(n.path))
      .join(' ')}`,
    '',
    'function __sbx_path --description "command path of the sbx command line"',
    '    set -l path',
    '    for t in (commandline -opc)[2..-1]',
    "        string match -q -- '-*' $t; and continue",
    '        set -l candidate (string join " " $path $t)',
    '        contains -- $candidate $__sbx_paths; and set path $path $t',
    '    end',
    '    string join " " $path',
    'end',
    '',
    'function __sbx_path_is',
    '    set -l p (__sbx_path)',
    '    test "$p" = "$argv[1]"',
    'end',
    '',
    'complete -c sbx -f',
  ];
  for (const n of list) {
    const cond = `-n ${fq(`__sbx_path_is ${fq(n.path)}`)}`;
    for (const s of n.subs) lines.push(`complete -c sbx ${cond} -f -a ${fq(s.name)} -d ${fq(s.summary)}`);
    const own = n.path === '' ? n.options : (n.spec?.options ?? []);
    for (const o of own) {
      const parts = spellings(o);
      const long = parts.find((p) => p.startsWith('--'));
      const short = parts.find((p) => /^-[^-]$/.test(p));
      let line = `complete -c sbx ${n.path === '' ? '' : `${cond} `}`;
      if (long) line += `-l ${long.slice(2)} `;
      if (short) line += `-s ${short.slice(1)} `;
      if (takesValue(o.flags)) line += o.complete ? '-r -F ' : o.choices ? `-x -a ${fq(o.choices.join(' '))} ` : '-x ';
      lines.push(`${line}-d ${fq(o.description)}`.replace(/ {2,}/g, ' '));
    }
    const words = argChoices(n.spec);
    if (words.length > 0) lines.push(`complete -c sbx ${cond} -f -a ${fq(words.join(' '))}`);
    if (argFiles(n.spec)) lines.push(`complete -c sbx ${cond} -F`);
  }
  return `${lines.join('\n')}\n`;
}

/** The completion script for `shell`. */
export function completionScript(shell: Shell, commands: readonly CommandSpec[], globals: readonly OptionSpec[]): string {
  const list = nodes(commands, globals);
  if (shell === 'bash') return bash(list);
  if (shell === 'zsh') return zsh(list);
  return fish(list);
}
