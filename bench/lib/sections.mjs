// SCALE.md is written by two benches: each replaces its own `## ` section and keeps the others.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

/** Replaces the section starting `## <title>` (up to the next `## `) in `file`, or appends it. */
export function writeSection(file, title, body, header = '') {
  let text = existsSync(file) ? readFileSync(file, 'utf8') : header;
  if (header && !text.startsWith(header.split('\n')[0])) text = header;
  const start = text.indexOf(`\n## ${title}\n`);
  const block = `## ${title}\n${body.trimEnd()}\n`;
  if (start < 0) {
    text = `${text.trimEnd()}\n\n${block}`;
  } else {
    const next = text.indexOf('\n## ', start + 1);
    text = `${text.slice(0, start + 1)}${block}${next < 0 ? '' : `\n${text.slice(next + 1)}`}`;
  }
  writeFileSync(file, text);
}
