/**
 * A small, bounded terminal screen model for the dashboard's TTY terminal: printable characters
 * overwrite cells and wrap at the width; `\r`, `\n`, `\b`, `\t` move the cursor; the CSI sequences
 * a shell's line editor and simple tools use are applied (cursor moves and positioning, erase in
 * line/display, insert/delete/erase characters, cursor position report); colours and every other
 * escape sequence (CSI, OSC, two- and three-character ESC) are parsed and ignored. The screen is the
 * last `rows` lines; at most `maxLines` lines are kept (older ones scroll away). Sequences split
 * across writes are handled: the parser's state carries over.
 */
export class Screen {
  /** Lines of cells (one string per cell: a code point). */
  private lines: string[][] = [[]];
  private row = 0;
  private col = 0;
  private state: 'text' | 'esc' | 'esc2' | 'csi' | 'osc' | 'osc_esc' = 'text';
  private params = '';

  constructor(
    public cols = 80,
    public rows = 24,
    private readonly maxLines = 2000,
    /** Bytes the terminal answers with (a cursor position report). */
    private readonly reply: (data: string) => void = () => undefined,
  ) {}

  resize(cols: number, rows: number): void {
    this.cols = Math.max(1, cols);
    this.rows = Math.max(1, rows);
    this.col = Math.min(this.col, this.cols - 1);
  }

  /** Index of the screen's first line. */
  private get top(): number {
    return Math.max(0, this.lines.length - this.rows);
  }

  write(data: string): void {
    for (const ch of data) this.put(ch);
  }

  private put(ch: string): void {
    switch (this.state) {
      case 'esc':
        if (ch === '[') {
          this.state = 'csi';
          this.params = '';
        } else if (ch === ']') this.state = 'osc';
        else if ('()*+#%'.includes(ch)) this.state = 'esc2';
        else {
          this.state = 'text';
          if (ch === 'M') this.row = Math.max(this.top, this.row - 1); // reverse index
        }
        return;
      case 'esc2':
        this.state = 'text';
        return;
      case 'osc':
        if (ch === '\x07') this.state = 'text';
        else if (ch === '\x1b') this.state = 'osc_esc';
        return;
      case 'osc_esc':
        this.state = ch === '\\' ? 'text' : 'osc';
        return;
      case 'csi': {
        const c = ch.charCodeAt(0);
        if (c >= 0x40 && c <= 0x7e) {
          this.state = 'text';
          this.csi(ch, this.params);
        } else if (this.params.length < 64) this.params += ch;
        return;
      }
      default:
        this.print(ch);
    }
  }

  private print(ch: string): void {
    switch (ch) {
      case '\x1b':
        this.state = 'esc';
        return;
      case '\r':
        this.col = 0;
        return;
      case '\n':
      case '\v':
      case '\f':
        this.down(1, true);
        return;
      case '\b':
        this.col = Math.max(0, Math.min(this.col, this.cols - 1) - 1);
        return;
      case '\t':
        this.col = Math.min(this.cols - 1, (Math.floor(this.col / 8) + 1) * 8);
        return;
      default:
        if (ch.charCodeAt(0) < 0x20 || ch === '\x7f') return; // bell and other controls
        if (this.col >= this.cols) {
          this.col = 0;
          this.down(1, true);
        }
        this.cell(this.row, this.col, ch);
        this.col++;
    }
  }

  /** Moves down; with `scroll`, past the last line adds lines (dropping the oldest past maxLines). */
  private down(n: number, scroll: boolean): void {
    for (let i = 0; i < n; i++) {
      if (this.row + 1 < this.lines.length) this.row++;
      else if (scroll) {
        this.lines.push([]);
        this.row++;
      }
    }
    if (this.lines.length > this.maxLines) {
      const drop = this.lines.length - this.maxLines;
      this.lines.splice(0, drop);
      this.row -= drop;
    }
  }

  private line(r: number): string[] {
    while (this.lines.length <= r) this.lines.push([]);
    return this.lines[r]!;
  }

  private cell(r: number, c: number, ch: string): void {
    const l = this.line(r);
    while (l.length < c) l.push(' ');
    l[c] = ch;
  }

  private csi(final: string, raw: string): void {
    if (raw.startsWith('?') || raw.startsWith('>') || raw.startsWith('=')) return; // private modes: ignored
    const ps = raw.split(';').map((p) => (p === '' ? NaN : Number(p)));
    const n = (i = 0, d = 1) => (Number.isFinite(ps[i]) && ps[i]! > 0 ? ps[i]! : d);
    const l = () => this.line(this.row);
    switch (final) {
      case 'A':
        this.row = Math.max(this.top, this.row - n());
        break;
      case 'B':
        this.down(n(), false);
        break;
      case 'C':
        this.col = Math.min(this.cols - 1, this.col + n());
        break;
      case 'D':
        this.col = Math.max(0, Math.min(this.col, this.cols - 1) - n());
        break;
      case 'G':
        this.col = Math.min(this.cols - 1, n() - 1);
        break;
      case 'H':
      case 'f': {
        const top = this.top;
        this.row = top + Math.min(this.rows, n(0)) - 1;
        this.line(this.row);
        this.col = Math.min(this.cols - 1, n(1) - 1);
        break;
      }
      case 'K': {
        const line = l();
        const mode = Number.isFinite(ps[0]) ? ps[0] : 0;
        if (mode === 0) line.length = Math.min(line.length, this.col);
        else if (mode === 1) for (let i = 0; i <= this.col && i < line.length; i++) line[i] = ' ';
        else line.length = 0;
        break;
      }
      case 'J': {
        const mode = Number.isFinite(ps[0]) ? ps[0] : 0;
        if (mode === 0) {
          l().length = Math.min(l().length, this.col);
          for (let r = this.row + 1; r < this.lines.length; r++) this.lines[r]!.length = 0;
        } else if (mode === 1) {
          for (let r = this.top; r < this.row; r++) this.lines[r]!.length = 0;
          for (let i = 0; i <= this.col && i < l().length; i++) l()[i] = ' ';
        } else for (let r = this.top; r < this.lines.length; r++) this.lines[r]!.length = 0;
        break;
      }
      case 'P':
        l().splice(this.col, n());
        break;
      case '@': {
        const line = l();
        if (this.col < line.length) line.splice(this.col, 0, ...Array<string>(n()).fill(' '));
        if (line.length > this.cols) line.length = this.cols;
        break;
      }
      case 'X':
        for (let i = this.col; i < this.col + n() && i < l().length; i++) l()[i] = ' ';
        break;
      case 'n':
        if (ps[0] === 6) this.reply(`\x1b[${this.row - this.top + 1};${Math.min(this.col, this.cols - 1) + 1}R`);
        else if (ps[0] === 5) this.reply('\x1b[0n');
        break;
      default:
      // m (colours) and the rest: ignored
    }
  }

  /** The text before the cursor, the character under it (a space past the end), and the rest. */
  parts(): [string, string, string] {
    const before = this.lines.slice(0, this.row).map((l) => l.join(''));
    const line = this.lines[this.row] ?? [];
    const c = Math.min(this.col, this.cols);
    const head = line.slice(0, c).join('').padEnd(c, ' ');
    const under = line[c] ?? ' ';
    const tail = line.slice(c + 1).join('');
    const after = this.lines.slice(this.row + 1).map((l) => l.join(''));
    return [[...before, head].join('\n'), under, [tail, ...after].join('\n')];
  }

  /** The whole text (tests and copy). */
  text(): string {
    return this.lines.map((l) => l.join('')).join('\n');
  }
}
