/** POSIX shell words: the one home of quoting for every layer (scripts, hints, completions). */

/** POSIX single-quote quoting: the result is one word that the shell never expands. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** A word as one would type it: left bare when it holds only plain characters, else single-quoted. */
export function shellWord(s: string): string {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : shellQuote(s);
}

/** The `sh -c` script for shell mode: the command as written, then each arg quoted. */
export function buildShellCommand(command: string, args: readonly string[]): string {
  return [command, ...args.map(shellQuote)].join(' ');
}
