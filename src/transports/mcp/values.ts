/** Values and argument shapes shared by the MCP tools: limits, zod pieces, error bodies, byte encodings. */
import { z } from 'zod';
import { SbxError } from '../../contracts/errors.js';

/** Files larger than this are refused by read_file and the file resource (use exec to read parts). */
export const READ_LIMIT = 8 * 1024 * 1024;

/** The URI template of a sandbox's files: `sbx://sandboxes/sb-1a2b/files/workspace/main.py`. */
export const FILE_URI_TEMPLATE = 'sbx://sandboxes/{sandbox_id}/files{+path}';

export type Json = Record<string, unknown>;

/** A tool error whose text is `{code, message}`. */
export class ToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export function errorBody(err: unknown): { code: string; message: string } {
  if (err instanceof SbxError || err instanceof ToolError) return { code: err.code, message: err.message };
  if ((err as { name?: string })?.name === 'AbortError') return { code: 'cancelled', message: 'the request was cancelled' };
  return { code: 'internal', message: err instanceof Error ? err.message : String(err) };
}

export const sandboxId = z.string().min(1).describe('sandbox id, e.g. sb-1a2b3c4d (from spawn or list_sandboxes)');
export const duration = z
  .union([z.string().min(1), z.number().positive()])
  .describe('a duration such as "30s", "5m" or "1h30m" (a bare number is seconds)');
export const stringMap = z.record(z.string(), z.string());

export function toDuration(v: string | number | undefined): string | undefined {
  if (v === undefined) return undefined;
  return typeof v === 'number' ? `${v}s` : v;
}

/** Strict base64 (whitespace allowed) → bytes. */
export function decodeBase64(text: string): Buffer {
  const s = text.replace(/\s+/g, '');
  if (s.length % 4 === 1 || !/^[A-Za-z0-9+/]*={0,2}$/.test(s))
    throw new ToolError('bad_request', 'content is not valid base64 (encoding "base64" was given)');
  return Buffer.from(s, 'base64');
}

/** Text when the bytes are valid UTF-8, else base64. */
export function textOrBase64(bytes: Uint8Array): { encoding: 'utf8' | 'base64'; content: string } {
  try {
    return { encoding: 'utf8', content: new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    return { encoding: 'base64', content: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64') };
  }
}

export function checkSize(bytes: Uint8Array, path: string): void {
  if (bytes.byteLength > READ_LIMIT) {
    throw new ToolError(
      'payload_too_large',
      `${path} is ${bytes.byteLength} bytes; read_file returns at most ${READ_LIMIT} bytes: read parts of it ` +
        `with exec (e.g. head -c, tail -c, split)`,
    );
  }
}

/** The exec result as text an agent reads easily. */
export function renderExec(r: Json, notes: string[]): string {
  const block = (name: string, text: string) =>
    text === '' ? `${name}: (empty)\n` : `${name}:\n${text}${text.endsWith('\n') ? '' : '\n'}`;
  let text = `exit_code: ${String(r.exit_code)}${r.timed_out ? ' (timed out)' : ''}\nduration: ${String(r.duration ?? '?')}\n`;
  text += block('stdout', String(r.stdout)) + block('stderr', String(r.stderr));
  for (const n of notes) text += `[sbx: ${n}]\n`;
  return text;
}
