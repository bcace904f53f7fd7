/**
 * The in-memory provider's shell grammar: a small POSIX `sh` subset, enough for the scripts tests
 * and the provider contract run — words with '…', "…", \ and $NAME/${NAME}/$?/$1 expansion;
 * `;` `&` `&&` `||` `|` `!`; `( … )` and `{ …; }`; `if/elif/else/fi`, `for … in …; do … done`,
 * `while … do … done`; redirections `>`, `>>`, `<`, `N>`, `N>&M`. Anything else (command
 * substitution, here-documents, globbing) is a syntax error the interpreter reports with exit 2.
 */

export type Part = { q: 'lit' | 'sq' | 'dq'; text: string };
export type Word = Part[];

export interface Redirect {
  fd: number;
  op: '>' | '>>' | '<' | '>&';
  target: Word;
}

export type Command =
  | { type: 'simple'; assigns: Array<[string, Word]>; words: Word[]; redirs: Redirect[] }
  | { type: 'subshell' | 'group'; body: List; redirs: Redirect[] }
  | { type: 'if'; clauses: Array<[List, List]>; otherwise: List | null; redirs: Redirect[] }
  | { type: 'for'; name: string; items: Word[]; body: List; redirs: Redirect[] }
  | { type: 'while'; cond: List; body: List; until: boolean; redirs: Redirect[] };

export interface Pipeline {
  negate: boolean;
  cmds: Command[];
}
export interface AndOr {
  first: Pipeline;
  rest: Array<['&&' | '||', Pipeline]>;
}
export interface List {
  items: Array<{ andOr: AndOr; background: boolean }>;
}

export class ShellSyntaxError extends Error {}

type Token = { t: 'word'; word: Word; raw: string } | { t: 'op'; op: string };

const OPS = ['&&', '||', '>>', '>&', ';;', ';', '&', '|', '(', ')', '<', '>', '\n'];

/** Splits a script into words and operators. */
export function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === ' ' || c === '\t') {
      i++;
      continue;
    }
    if (c === '\\' && src[i + 1] === '\n') {
      i += 2;
      continue;
    }
    if (c === '#') {
      while (i < src.length && src[i] !== '\n') i++;
      continue;
    }
    // `2>`, `2>>`, `2>&1`: a number right before a redirection names the descriptor.
    const fd = /^(\d)(?=[<>])/.exec(src.slice(i));
    if (fd) {
      out.push({ t: 'op', op: `fd${fd[1]}` });
      i++;
      continue;
    }
    const op = OPS.find((o) => src.startsWith(o, i));
    if (op) {
      if (op === ';;') throw new ShellSyntaxError('case is not supported');
      out.push({ t: 'op', op });
      i += op.length;
      continue;
    }
    const start = i;
    const word: Word = [];
    const lit = (text: string, q: Part['q']) => {
      const last = word[word.length - 1];
      if (last && last.q === q && q !== 'lit') last.text += text;
      else word.push({ q, text });
    };
    while (i < src.length && !/[\s;&|()<>]/.test(src[i]!)) {
      const ch = src[i]!;
      if (ch === "'") {
        const end = src.indexOf("'", i + 1);
        if (end === -1) throw new ShellSyntaxError('unterminated quoted string');
        lit(src.slice(i + 1, end), 'sq');
        i = end + 1;
      } else if (ch === '"') {
        let text = '';
        i++;
        while (i < src.length && src[i] !== '"') {
          if (src[i] === '\\' && '$`"\\\n'.includes(src[i + 1] ?? '')) {
            // An escaped `$` stays literal: marked so expansion skips it.
            const next = src[i + 1]!;
            text += next === '$' || next === '\\' ? `\\${next}` : next === '\n' ? '' : next;
            i += 2;
          } else {
            if (src[i] === '`' || (src[i] === '$' && src[i + 1] === '('))
              throw new ShellSyntaxError('command substitution is not supported');
            text += src[i] === '\\' ? '\\\\' : src[i];
            i++;
          }
        }
        if (i >= src.length) throw new ShellSyntaxError('unterminated quoted string');
        i++;
        word.push({ q: 'dq', text });
      } else if (ch === '\\') {
        lit(src[i + 1] ?? '', 'sq');
        i += 2;
      } else {
        if (ch === '`' || (ch === '$' && src[i + 1] === '(')) throw new ShellSyntaxError('command substitution is not supported');
        let j = i;
        while (j < src.length && !/[\s;&|()<>'"\\`]/.test(src[j]!) && !(src[j] === '$' && src[j + 1] === '(')) j++;
        if (j === i) j++;
        word.push({ q: 'lit', text: src.slice(i, j) });
        i = j;
      }
    }
    out.push({ t: 'word', word, raw: src.slice(start, i) });
  }
  return out;
}

/** Parses a whole script. */
export function parse(src: string): List {
  const p = new Parser(tokenize(src));
  const list = p.list([]);
  if (!p.done()) throw new ShellSyntaxError(`unexpected ${p.peekText()}`);
  return list;
}

class Parser {
  private i = 0;
  constructor(private readonly toks: Token[]) {}

  done(): boolean {
    this.skipNewlines();
    return this.i >= this.toks.length;
  }
  peekText(): string {
    const t = this.toks[this.i];
    return t === undefined ? 'end of script' : t.t === 'op' ? JSON.stringify(t.op) : JSON.stringify(t.raw);
  }
  private skipNewlines(): void {
    while (this.isOp('\n')) this.i++;
  }
  private isOp(op: string): boolean {
    const t = this.toks[this.i];
    return t?.t === 'op' && t.op === op;
  }
  /** A reserved word in command position: an unquoted plain word. */
  private isWord(text: string): boolean {
    const t = this.toks[this.i];
    return t?.t === 'word' && t.raw === text && t.word.length === 1 && t.word[0]!.q === 'lit';
  }
  private expectWord(text: string): void {
    this.skipNewlines();
    if (!this.isWord(text)) throw new ShellSyntaxError(`expected "${text}", got ${this.peekText()}`);
    this.i++;
  }

  /** Commands up to one of `stops` (reserved words) or `)` or the end. */
  list(stops: string[]): List {
    const items: List['items'] = [];
    for (;;) {
      this.skipNewlines();
      const t = this.toks[this.i];
      if (t === undefined || this.isOp(')') || stops.some((s) => this.isWord(s))) break;
      const andOr = this.andOr();
      let background = false;
      if (this.isOp('&')) {
        background = true;
        this.i++;
      } else if (this.isOp(';') || this.isOp('\n')) {
        this.i++;
      } else if (!(this.i >= this.toks.length || this.isOp(')') || stops.some((s) => this.isWord(s)))) {
        throw new ShellSyntaxError(`unexpected ${this.peekText()}`);
      }
      items.push({ andOr, background });
    }
    return { items };
  }

  private andOr(): AndOr {
    const first = this.pipeline();
    const rest: AndOr['rest'] = [];
    while (this.isOp('&&') || this.isOp('||')) {
      const op = (this.toks[this.i++] as { op: '&&' | '||' }).op;
      this.skipNewlines();
      rest.push([op, this.pipeline()]);
    }
    return { first, rest };
  }

  private pipeline(): Pipeline {
    let negate = false;
    if (this.isWord('!')) {
      negate = true;
      this.i++;
    }
    const cmds = [this.command()];
    while (this.isOp('|')) {
      this.i++;
      this.skipNewlines();
      cmds.push(this.command());
    }
    return { negate, cmds };
  }

  private command(): Command {
    if (this.isOp('(')) {
      this.i++;
      const body = this.list([]);
      if (!this.isOp(')')) throw new ShellSyntaxError(`expected ")", got ${this.peekText()}`);
      this.i++;
      return { type: 'subshell', body, redirs: this.redirects() };
    }
    if (this.isWord('{')) {
      this.i++;
      const body = this.list(['}']);
      this.expectWord('}');
      return { type: 'group', body, redirs: this.redirects() };
    }
    if (this.isWord('if')) return this.ifCommand();
    if (this.isWord('for')) return this.forCommand();
    if (this.isWord('while') || this.isWord('until')) {
      const until = this.isWord('until');
      this.i++;
      const cond = this.list(['do']);
      this.expectWord('do');
      const body = this.list(['done']);
      this.expectWord('done');
      return { type: 'while', cond, body, until, redirs: this.redirects() };
    }
    return this.simple();
  }

  private ifCommand(): Command {
    this.i++;
    const clauses: Array<[List, List]> = [];
    let otherwise: List | null = null;
    for (;;) {
      const cond = this.list(['then']);
      this.expectWord('then');
      clauses.push([cond, this.list(['elif', 'else', 'fi'])]);
      if (this.isWord('elif')) {
        this.i++;
        continue;
      }
      if (this.isWord('else')) {
        this.i++;
        otherwise = this.list(['fi']);
      }
      this.expectWord('fi');
      return { type: 'if', clauses, otherwise, redirs: this.redirects() };
    }
  }

  private forCommand(): Command {
    this.i++;
    const t = this.toks[this.i++];
    if (t?.t !== 'word' || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(t.raw)) throw new ShellSyntaxError('for needs a variable name');
    const items: Word[] = [];
    this.skipNewlines();
    if (this.isWord('in')) {
      this.i++;
      for (let w = this.toks[this.i]; w?.t === 'word'; w = this.toks[++this.i]) items.push(w.word);
    }
    if (this.isOp(';') || this.isOp('\n')) this.i++;
    this.expectWord('do');
    const body = this.list(['done']);
    this.expectWord('done');
    return { type: 'for', name: t.raw, items, body, redirs: this.redirects() };
  }

  private redirect(): Redirect | null {
    let fd: number | null = null;
    const t = this.toks[this.i];
    if (t?.t === 'op' && t.op.startsWith('fd')) {
      fd = Number(t.op.slice(2));
      this.i++;
    }
    const op = this.toks[this.i];
    if (op?.t !== 'op' || !['>', '>>', '<', '>&'].includes(op.op)) {
      if (fd !== null) throw new ShellSyntaxError('a descriptor number must be followed by a redirection');
      return null;
    }
    this.i++;
    const target = this.toks[this.i++];
    if (target?.t !== 'word') throw new ShellSyntaxError(`redirection ${op.op} needs a target`);
    return { fd: fd ?? (op.op === '<' ? 0 : 1), op: op.op as Redirect['op'], target: target.word };
  }

  private redirects(): Redirect[] {
    const out: Redirect[] = [];
    for (let r = this.redirect(); r; r = this.redirect()) out.push(r);
    return out;
  }

  private simple(): Command {
    const assigns: Array<[string, Word]> = [];
    const words: Word[] = [];
    const redirs: Redirect[] = [];
    for (;;) {
      const r = this.redirect();
      if (r) {
        redirs.push(r);
        continue;
      }
      const t = this.toks[this.i];
      if (t?.t !== 'word') break;
      const assign = words.length === 0 ? /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(t.raw) : null;
      if (assign && t.word[0]!.q === 'lit' && t.word[0]!.text.startsWith(`${assign[1]}=`)) {
        const [head, ...tail] = t.word;
        assigns.push([assign[1]!, [{ q: 'lit', text: head!.text.slice(assign[1]!.length + 1) }, ...tail]]);
      } else {
        words.push(t.word);
      }
      this.i++;
    }
    if (words.length === 0 && assigns.length === 0 && redirs.length === 0) throw new ShellSyntaxError(`unexpected ${this.peekText()}`);
    return { type: 'simple', assigns, words, redirs };
  }
}
