/** The generated documentation files, by path relative to the package root. */
import { VERSION } from '../../../version.js';
import { GLOBAL_OPTIONS } from '../program.js';
import { COMMANDS } from '../registry.js';
import { completionScript } from './completions.js';
import { manPage } from './man.js';

/** Generated file contents keyed by path; scripts/gen-docs.mjs writes them, a test compares them. */
export function docFiles(): Record<string, string> {
  return {
    'completions/sbx.bash': completionScript('bash', COMMANDS, GLOBAL_OPTIONS),
    'completions/_sbx': completionScript('zsh', COMMANDS, GLOBAL_OPTIONS),
    'completions/sbx.fish': completionScript('fish', COMMANDS, GLOBAL_OPTIONS),
    'man/sbx.1': manPage(COMMANDS, GLOBAL_OPTIONS, VERSION),
  };
}
