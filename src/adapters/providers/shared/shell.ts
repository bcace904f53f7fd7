/** POSIX single-quote quoting: the result is one word that the shell never expands. */
export function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The `sh -c` script for shell mode: the command as written, then each arg quoted. */
export function buildShellCommand(command: string, args: readonly string[]): string {
  return [command, ...args.map(shellQuote)].join(' ');
}
