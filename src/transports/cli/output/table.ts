import type { ChalkInstance } from 'chalk';

export interface Column<T> {
  header: string;
  value: (row: T) => string;
  /** Colour a cell (applied after padding so alignment is by visible width). */
  style?: (text: string, row: T) => string;
  align?: 'left' | 'right';
}

const ANSI = /\x1b\[[0-9;]*m/g;

/** Visible width of a string (ANSI escapes removed; wide characters counted once). */
export function visibleWidth(s: string): number {
  return [...s.replace(ANSI, '')].length;
}

/** Renders aligned columns separated by two spaces; the last column is never padded. */
export function renderTable<T>(columns: ReadonlyArray<Column<T>>, rows: readonly T[], c: ChalkInstance, maxWidth = 160): string {
  const cells = rows.map((row) => columns.map((col) => col.value(row)));
  const widths = columns.map((col, i) => Math.max(visibleWidth(col.header), ...cells.map((r) => visibleWidth(r[i]!))));
  const lines: string[] = [];
  const pad = (text: string, i: number, last: boolean, align: 'left' | 'right') => {
    if (last) return text;
    const gap = ' '.repeat(Math.max(0, widths[i]! - visibleWidth(text)));
    return align === 'right' ? gap + text : text + gap;
  };
  lines.push(
    columns
      .map((col, i) => c.bold(pad(col.header, i, i === columns.length - 1, col.align ?? 'left')))
      .join('  ')
      .trimEnd(),
  );
  rows.forEach((row, r) => {
    const parts = columns.map((col, i) => {
      const text = pad(cells[r]![i]!, i, i === columns.length - 1, col.align ?? 'left');
      return col.style ? col.style(text, row) : text;
    });
    let line = parts.join('  ').trimEnd();
    if (visibleWidth(line) > maxWidth && !line.includes('\x1b')) line = `${line.slice(0, maxWidth - 1)}…`;
    lines.push(line);
  });
  return `${lines.join('\n')}\n`;
}

/** `key: value` lines with the keys aligned. */
export function renderFields(pairs: ReadonlyArray<readonly [string, string]>, c: ChalkInstance): string {
  const width = Math.max(0, ...pairs.map(([k]) => k.length));
  return pairs.map(([k, v]) => `${c.bold(`${k}:`.padEnd(width + 1))} ${v}`).join('\n') + '\n';
}
