import type { FastifyRequest } from 'fastify';
import { badRequest, SbxError } from '../../core/errors.js';

/**
 * The JSON file-write body `{path, content, mode?, encoding?}` read as a stream: a small incremental
 * scanner for that one object shape hands the (unescaped) bytes of the `content` string to a
 * target as they arrive (file-upload.ts decodes them on the fly into the sandbox or a spool) and
 * keeps the other members as ordinary JSON values. No whole-body string is ever built. Members may
 * come in any order.
 */

export const tooLarge = () => new SbxError('payload_too_large', 'request body is larger than the server accepts');

/** Where the (unescaped) bytes of the `content` string go as they arrive. */
export interface ContentTarget {
  /** Plain bytes of the string, as they are. */
  add(chunk: Buffer, start: number, end: number): void;
  /** One code point from an escape (U+FFFD for a lone surrogate). */
  codePoint(cp: number): void;
}

const MAX_MEMBER_BYTES = 1024 * 1024;
const MAX_KEY_BYTES = 1024;

const malformed = (what: string) => badRequest(`malformed JSON body: ${what}`);

const enum S {
  Start,
  FirstKey,
  Key,
  Colon,
  Value,
  Content,
  ContentEscape,
  ContentHex,
  Member,
  CommaOrEnd,
  NextKey,
  End,
}

const ESCAPES: Record<number, number> = { 0x22: 0x22, 0x5c: 0x5c, 0x2f: 0x2f, 0x62: 0x08, 0x66: 0x0c, 0x6e: 0x0a, 0x72: 0x0d, 0x74: 0x09 };
const isWs = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  return -1;
}

/** Incremental scanner of one `{...}` object whose `content` member is a (possibly huge) string. */
export class FileWriteScanner {
  private state = S.Start;
  private readonly fields: Record<string, unknown> = {};
  private key = '';
  private keyBytes: number[] = [];
  private keyEscaped = false;
  private content: ContentTarget | undefined;
  private hex = 0;
  private hexDigits = 0;
  private high = -1;
  // A non-content member's raw bytes, parsed with JSON.parse once complete.
  private member: number[] = [];
  private memberDepth = 0;
  private memberInString = false;
  private memberEscaped = false;
  private memberScalar = false;

  /** `open` gives the target of the content when it starts (the members read so far in hand). */
  constructor(private readonly open: (fields: Readonly<Record<string, unknown>>) => ContentTarget) {}

  write(chunk: Buffer): void {
    let i = 0;
    const n = chunk.length;
    while (i < n) {
      const c = chunk[i]!;
      switch (this.state) {
        case S.Start:
          if (isWs(c)) break;
          if (c !== 0x7b) throw malformed('the body must be a JSON object');
          this.state = S.FirstKey;
          break;
        case S.FirstKey:
        case S.NextKey:
          if (isWs(c)) break;
          if (c === 0x7d && this.state === S.FirstKey) {
            this.state = S.End;
            break;
          }
          if (c !== 0x22) throw malformed('expected a property name');
          this.keyBytes = [];
          this.keyEscaped = false;
          this.state = S.Key;
          break;
        case S.Key:
          if (!this.keyEscaped && c === 0x22) {
            try {
              this.key = JSON.parse(`"${Buffer.from(this.keyBytes).toString('utf8')}"`) as string;
            } catch {
              throw malformed('invalid property name');
            }
            this.state = S.Colon;
            break;
          }
          this.keyEscaped = !this.keyEscaped && c === 0x5c;
          if (this.keyBytes.length >= MAX_KEY_BYTES) throw malformed('property name too long');
          this.keyBytes.push(c);
          break;
        case S.Colon:
          if (isWs(c)) break;
          if (c !== 0x3a) throw malformed("expected ':'");
          this.state = S.Value;
          break;
        case S.Value:
          if (isWs(c)) break;
          if (this.key === 'content') {
            if (this.content) throw badRequest('invalid body: content is given twice');
            if (c !== 0x22) throw badRequest('invalid body: content: must be string');
            this.content = this.open(this.fields);
            this.state = S.Content;
            break;
          }
          this.member = [];
          this.memberDepth = 0;
          this.memberInString = false;
          this.memberEscaped = false;
          this.memberScalar = false;
          this.state = S.Member;
          continue; // the member scanner takes this byte
        case S.Content: {
          // The bulk of the body: copy runs of plain bytes at once.
          let j = i;
          while (j < n) {
            const b = chunk[j]!;
            if (b === 0x22 || b === 0x5c || b < 0x20) break;
            j++;
          }
          if (j > i) {
            this.flushHigh();
            this.content!.add(chunk, i, j);
            i = j;
            continue;
          }
          if (c < 0x20) throw malformed('control character in a string');
          if (c === 0x22) {
            this.flushHigh();
            this.state = S.CommaOrEnd;
          } else this.state = S.ContentEscape;
          break;
        }
        case S.ContentEscape:
          if (c === 0x75) {
            this.hex = 0;
            this.hexDigits = 0;
            this.state = S.ContentHex;
            break;
          }
          if (ESCAPES[c] === undefined) throw malformed('bad escape in a string');
          this.flushHigh();
          this.content!.codePoint(ESCAPES[c]!);
          this.state = S.Content;
          break;
        case S.ContentHex: {
          const v = hexValue(c);
          if (v < 0) throw malformed('bad \\u escape in a string');
          this.hex = this.hex * 16 + v;
          if (++this.hexDigits === 4) {
            this.codeUnit(this.hex);
            this.state = S.Content;
          }
          break;
        }
        case S.Member:
          if (this.memberByte(c)) {
            i++;
            this.endMember();
            continue;
          }
          if (this.state !== S.Member) continue; // a scalar ended at a delimiter: reread it
          break;
        case S.CommaOrEnd:
          if (isWs(c)) break;
          if (c === 0x2c) this.state = S.NextKey;
          else if (c === 0x7d) this.state = S.End;
          else throw malformed("expected ',' or '}'");
          break;
        case S.End:
          if (!isWs(c)) throw malformed('unexpected data after the JSON object');
          break;
      }
      i++;
    }
  }

  /** The parsed body (`content` as "" with its text kept aside), or undefined for an empty body. */
  end(): Record<string, unknown> | undefined {
    if (this.state === S.Start) return undefined;
    if (this.state === S.Member && this.memberScalar && !this.memberInString) this.endMember();
    if (this.state !== S.End) throw malformed('unexpected end of JSON input');
    const body = { ...this.fields };
    if (this.content) body.content = '';
    return body;
  }

  /** Takes one byte of a non-content member; true when it completed the value (byte consumed). */
  private memberByte(c: number): boolean {
    const m = this.member;
    if (m.length === 0 && !this.memberScalar) {
      if (c === 0x22) this.memberInString = true;
      else if (c === 0x7b || c === 0x5b) this.memberDepth = 1;
      else this.memberScalar = true;
      m.push(c);
      return false;
    }
    if (m.length >= MAX_MEMBER_BYTES) throw tooLarge();
    if (this.memberInString) {
      m.push(c);
      if (this.memberEscaped) this.memberEscaped = false;
      else if (c === 0x5c) this.memberEscaped = true;
      else if (c === 0x22) {
        this.memberInString = false;
        if (this.memberDepth === 0) return true;
      }
      return false;
    }
    if (this.memberScalar) {
      if (c === 0x2c || c === 0x7d || c === 0x5d || isWs(c)) {
        this.endMember(); // the delimiter belongs to the object: not consumed
        return false;
      }
      m.push(c);
      return false;
    }
    m.push(c);
    if (c === 0x22) this.memberInString = true;
    else if (c === 0x7b || c === 0x5b) this.memberDepth++;
    else if (c === 0x7d || c === 0x5d) {
      if (--this.memberDepth === 0) return true;
    }
    return false;
  }

  private endMember(): void {
    let value: unknown;
    try {
      value = JSON.parse(Buffer.from(this.member).toString('utf8'));
    } catch (err) {
      throw malformed((err as Error).message);
    }
    // As JSON.parse: a repeated name keeps its last value.
    this.fields[this.key] = value;
    this.member = [];
    this.state = S.CommaOrEnd;
  }

  /** A \uXXXX code unit: surrogate pairs join; a lone surrogate becomes U+FFFD, as in a JS string's UTF-8. */
  private codeUnit(u: number): void {
    const content = this.content!;
    if (u >= 0xd800 && u <= 0xdbff) {
      this.flushHigh();
      this.high = u;
      return;
    }
    if (u >= 0xdc00 && u <= 0xdfff) {
      if (this.high >= 0) {
        content.codePoint(0x10000 + ((this.high - 0xd800) << 10) + (u - 0xdc00));
        this.high = -1;
      } else content.codePoint(0xfffd);
      return;
    }
    this.flushHigh();
    content.codePoint(u);
  }

  private flushHigh(): void {
    if (this.high < 0) return;
    this.high = -1;
    this.content!.codePoint(0xfffd);
  }
}

/** Content-Length of the request, or 0 when absent. */
export function declaredLength(request: FastifyRequest): number {
  const n = Number(request.headers['content-length']);
  return Number.isFinite(n) && n > 0 ? n : 0;
}
