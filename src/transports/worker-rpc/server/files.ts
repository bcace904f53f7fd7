/**
 * Files over the RPC in windows of at most 4 MiB (DESIGN.md §7). An upload is staged in this
 * worker's private directory window by window (in order) and written to the sandbox at the last
 * one, through the provider's own atomic write, so an interrupted upload leaves the old file.
 * Stale staging (10 min untouched) is removed; the staged total is bounded.
 */
import { randomBytes } from 'node:crypto';
import { appendFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RPC_FILE_WINDOW_BYTES, type FileReadParams, type FileWriteParams } from '../../../contracts/worker-rpc.js';
import { badRequest, SbxError, unavailable } from '../../../core/errors.js';
import type { Provider } from '../../../core/ports/index.js';

const STALE_MS = 10 * 60_000;
const MAX_STAGED_BYTES = 1024 * 1024 * 1024;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

interface Upload {
  file: string;
  path: string;
  offset: number;
  touched: number;
}

/** Decodes a base64 window; 400 for bad base64, 413 over the window size. */
export function decodeWindow(content: string): Buffer {
  if (content.length % 4 !== 0 || !BASE64.test(content)) throw badRequest('content is not valid base64');
  const bytes = Buffer.from(content, 'base64');
  if (bytes.byteLength > RPC_FILE_WINDOW_BYTES)
    throw new SbxError('payload_too_large', `a file window holds at most ${RPC_FILE_WINDOW_BYTES} bytes`);
  return bytes;
}

export class UploadStaging {
  private readonly uploads = new Map<string, Upload>();

  constructor(private readonly dir: string) {}

  private staged(): number {
    let n = 0;
    for (const u of this.uploads.values()) n += u.offset;
    return n;
  }

  private async sweep(now: number): Promise<void> {
    for (const [k, u] of this.uploads) {
      if (now - u.touched < STALE_MS) continue;
      this.uploads.delete(k);
      await rm(u.file, { force: true });
    }
  }

  /** One window of `file_write`; the whole file at the last one (or in one call without upload_id). */
  async write(provider: Provider, p: FileWriteParams, path: string, signal: AbortSignal): Promise<void> {
    const bytes = decodeWindow(p.content);
    if (p.upload_id === undefined) {
      if ((p.offset ?? 0) !== 0) throw badRequest('a write at an offset needs an upload_id');
      await provider.writeFile(p.runtime_id, path, bytes, p.mode, signal);
      return;
    }
    const now = Date.now();
    await this.sweep(now);
    const key = `${p.sandbox_id}\0${p.upload_id}`;
    const offset = p.offset ?? 0;
    let u = this.uploads.get(key);
    if (offset === 0 && p.truncate) {
      if (u) await rm(u.file, { force: true });
      if (this.staged() + bytes.byteLength > MAX_STAGED_BYTES)
        throw unavailable('this worker holds too many staged uploads; try again later');
      await mkdir(this.dir, { recursive: true, mode: 0o700 });
      u = { file: join(this.dir, `upload-${randomBytes(8).toString('hex')}`), path, offset: 0, touched: now };
      await writeFile(u.file, new Uint8Array(0), { mode: 0o600 });
      this.uploads.set(key, u);
    }
    if (!u) throw badRequest(`upload ${p.upload_id} is unknown (start it at offset 0 with truncate)`);
    if (u.path !== path) throw badRequest('an upload keeps one path');
    if (offset !== u.offset) throw badRequest(`window at offset ${offset}, expected ${u.offset}`);
    if (this.staged() + bytes.byteLength > MAX_STAGED_BYTES)
      throw unavailable('this worker holds too many staged uploads; try again later');
    await appendFile(u.file, bytes);
    u.offset += bytes.byteLength;
    u.touched = now;
    if (!p.final) return;
    this.uploads.delete(key);
    try {
      const whole = await readFile(u.file);
      await provider.writeFile(p.runtime_id, path, whole, p.mode, signal);
    } finally {
      await rm(u.file, { force: true });
    }
  }

  async close(): Promise<void> {
    for (const u of this.uploads.values()) await rm(u.file, { force: true });
    this.uploads.clear();
  }
}

/** One window of `file_read`: `{content (base64), size, eof}`. */
export async function readWindow(
  provider: Provider,
  p: FileReadParams,
  path: string,
  signal: AbortSignal,
): Promise<{ content: string; size: number; eof: boolean }> {
  const offset = p.offset ?? 0;
  const length = Math.min(p.length ?? RPC_FILE_WINDOW_BYTES, RPC_FILE_WINDOW_BYTES);
  if (!provider.openFile) {
    const all = await provider.readFile(p.runtime_id, path, signal, p.max_bytes);
    const part = all.subarray(offset, offset + length);
    return { content: Buffer.from(part).toString('base64'), size: all.byteLength, eof: offset + part.byteLength >= all.byteLength };
  }
  const file = await provider.openFile(p.runtime_id, path, signal, p.max_bytes);
  const it = file.body[Symbol.asyncIterator]();
  const parts: Buffer[] = [];
  let pos = 0;
  let taken = 0;
  try {
    while (taken < length) {
      const r = await it.next();
      if (r.done) break;
      const chunk = Buffer.from(r.value);
      const start = Math.max(0, offset - pos);
      pos += chunk.byteLength;
      if (start >= chunk.byteLength) continue;
      const piece = chunk.subarray(start, start + (length - taken));
      parts.push(piece);
      taken += piece.byteLength;
    }
  } finally {
    await it.return?.();
  }
  return { content: Buffer.concat(parts).toString('base64'), size: file.size, eof: offset + taken >= file.size };
}
