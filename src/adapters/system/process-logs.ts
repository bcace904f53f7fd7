import { mkdir, open, readdir, readFile, rename, rm, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { OutputChunk, OutputStream, ProcessLog, ProcessLogs } from '../../core/ports/index.js';

/**
 * Background processes' output logs on this host's disk (DESIGN.md §10): one directory per
 * process holding segment files named by the offset of their first byte. A segment is a run of
 * frames `[stream: 1 byte][length: u32 BE][bytes]`; a segment past `segmentBytes` is closed and a
 * new one begun, and the oldest segments are deleted once the kept bytes pass `limit`, so at most
 * about `limit` bytes (16 MiB by default) are kept however long the process runs. `base.json`
 * holds the per-stream counts of what was dropped. A frame cut short by a crash is cut off when
 * the log is opened again.
 */
export interface ProcessLogOptions {
  /** Bytes kept per process (default 16 MiB). */
  limit?: number;
  /** Size at which a segment is closed (default 1 MiB). */
  segmentBytes?: number;
}

const HEADER = 5;
const STREAM_CODE: Record<OutputStream, number> = { stdout: 1, stderr: 2 };
const CODE_STREAM: Record<number, OutputStream> = { 1: 'stdout', 2: 'stderr' };
/** Process ids are `p-` and base-36: nothing else names a directory here. */
const PROCESS_ID = /^p-[a-z0-9]{1,32}$/;

interface Frame {
  /** Output offset of the frame's first byte. */
  offset: number;
  stream: OutputStream;
  /** Position of the frame's bytes in the segment file. */
  pos: number;
  len: number;
}

interface Segment {
  start: number;
  /** Offset just past its last byte. */
  end: number;
  file: string;
  /** Size of the file in bytes (headers included). */
  size: number;
}

export function createProcessLogs(root: string, opts: ProcessLogOptions = {}): ProcessLogs {
  const limit = opts.limit ?? 16 * 1024 * 1024;
  const segmentBytes = opts.segmentBytes ?? 1024 * 1024;
  const dirOf = (id: string) => {
    if (!PROCESS_ID.test(id)) throw new Error(`not a process id: ${JSON.stringify(id)}`);
    return join(root, id);
  };
  return {
    async open(id, create) {
      const dir = dirOf(id);
      if (create) await mkdir(dir, { recursive: true, mode: 0o700 });
      let names: string[];
      try {
        names = await readdir(dir);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
        throw err;
      }
      return FileLog.load(dir, names, limit, segmentBytes);
    },
    async remove(id) {
      await rm(dirOf(id), { recursive: true, force: true });
    },
  };
}

class FileLog implements ProcessLog {
  private handle: FileHandle | null = null;
  /** Frames of the last segment (the one appended to). */
  private tail: Frame[] = [];
  /** Parsed frames of older segments, the last few read. */
  private readonly cache = new Map<string, Frame[]>();
  private chain: Promise<unknown> = Promise.resolve();

  private constructor(
    private readonly dir: string,
    private readonly segments: Segment[],
    readonly counts: Record<OutputStream, number>,
    private readonly limit: number,
    private readonly segmentBytes: number,
  ) {}

  static async load(dir: string, names: string[], limit: number, segmentBytes: number): Promise<FileLog> {
    const base = await readBase(dir);
    const counts = { stdout: base.stdout, stderr: base.stderr };
    const starts = names
      .map((n) => /^(\d+)\.seg$/.exec(n))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => Number(m[1]))
      .sort((a, b) => a - b);
    const segments: Segment[] = [];
    let last: Frame[] = [];
    for (const start of starts) {
      const file = join(dir, `${start}.seg`);
      const bytes = await readFile(file);
      const { frames, valid } = parseFrames(bytes, start);
      if (valid < bytes.byteLength) await writeFile(file, bytes.subarray(0, valid));
      for (const f of frames) counts[f.stream] += f.len;
      const end = frames.length ? frames[frames.length - 1]!.offset + frames[frames.length - 1]!.len : start;
      segments.push({ start, end, file, size: valid });
      last = frames;
    }
    const log = new FileLog(dir, segments, counts, limit, segmentBytes);
    log.tail = last;
    return log;
  }

  get start(): number {
    return this.segments[0]?.start ?? 0;
  }

  get end(): number {
    return this.segments[this.segments.length - 1]?.end ?? this.counts.stdout + this.counts.stderr;
  }

  append(stream: OutputStream, data: Uint8Array): Promise<void> {
    const run = this.chain.then(() => this.write(stream, data));
    this.chain = run.catch(() => undefined);
    return run;
  }

  private async write(stream: OutputStream, data: Uint8Array): Promise<void> {
    if (data.byteLength === 0) return;
    let seg = this.segments[this.segments.length - 1];
    if (!seg || seg.size >= this.segmentBytes) {
      await this.handle?.close();
      this.handle = null;
      if (seg) this.cache.set(seg.file, this.tail);
      const start = this.end;
      seg = { start, end: start, file: join(this.dir, `${start}.seg`), size: 0 };
      this.segments.push(seg);
      this.tail = [];
      await this.drop();
    }
    this.handle ??= await open(seg.file, 'a');
    const header = Buffer.alloc(HEADER);
    header[0] = STREAM_CODE[stream];
    header.writeUInt32BE(data.byteLength, 1);
    await this.handle.writev([header, data]);
    this.tail.push({ offset: seg.end, stream, pos: seg.size + HEADER, len: data.byteLength });
    seg.size += HEADER + data.byteLength;
    seg.end += data.byteLength;
    this.counts[stream] += data.byteLength;
  }

  /** Deletes the oldest segments until what is kept and a full new segment fit in `limit`. */
  private async drop(): Promise<void> {
    while (this.segments.length > 1 && this.end - this.segments[0]!.start + this.segmentBytes > this.limit) {
      const old = this.segments[0]!;
      const frames = this.cache.get(old.file) ?? parseFrames(await readFile(old.file), old.start).frames;
      const base = await readBase(this.dir);
      for (const f of frames) base[f.stream] += f.len;
      const tmp = join(this.dir, 'base.json.tmp');
      await writeFile(tmp, JSON.stringify(base));
      await rename(tmp, join(this.dir, 'base.json'));
      await rm(old.file, { force: true });
      this.cache.delete(old.file);
      this.segments.shift();
    }
  }

  async read(offset: number, maxBytes: number): Promise<OutputChunk[]> {
    try {
      return await this.readSegments(offset, maxBytes);
    } catch (err) {
      // The segment was dropped while being read: read again from what is kept now.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return this.readSegments(offset, maxBytes);
    }
  }

  private async readSegments(offset: number, maxBytes: number): Promise<OutputChunk[]> {
    const out: OutputChunk[] = [];
    let at = Math.max(offset, this.start);
    let budget = maxBytes;
    for (let i = 0; i < this.segments.length && budget > 0; i++) {
      const seg = this.segments[i]!;
      if (seg.end <= at) continue;
      const last = i === this.segments.length - 1;
      const frames = last ? this.tail : await this.framesOf(seg);
      if (frames.length === 0) continue;
      const reader = await open(seg.file, 'r');
      try {
        for (const f of frames) {
          if (budget <= 0) break;
          if (f.offset + f.len <= at) continue;
          const skip = at - f.offset;
          const len = Math.min(f.len - skip, budget);
          const buf = Buffer.alloc(len);
          await reader.read(buf, 0, len, f.pos + skip);
          out.push({ stream: f.stream, data: buf, offset: at });
          at += len;
          budget -= len;
        }
      } finally {
        await reader.close();
      }
    }
    return out;
  }

  private async framesOf(seg: Segment): Promise<Frame[]> {
    const cached = this.cache.get(seg.file);
    if (cached) return cached;
    const frames = parseFrames(await readFile(seg.file), seg.start).frames;
    if (this.cache.size >= 4) this.cache.delete(this.cache.keys().next().value!);
    this.cache.set(seg.file, frames);
    return frames;
  }

  async close(): Promise<void> {
    await this.chain;
    await this.handle?.close();
    this.handle = null;
  }
}

function parseFrames(bytes: Uint8Array, start: number): { frames: Frame[]; valid: number } {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frames: Frame[] = [];
  let pos = 0;
  let offset = start;
  while (pos + HEADER <= buf.byteLength) {
    const stream = CODE_STREAM[buf[pos]!];
    const len = buf.readUInt32BE(pos + 1);
    if (!stream || pos + HEADER + len > buf.byteLength) break;
    frames.push({ offset, stream, pos: pos + HEADER, len });
    offset += len;
    pos += HEADER + len;
  }
  return { frames, valid: pos };
}

async function readBase(dir: string): Promise<Record<OutputStream, number>> {
  try {
    const b = JSON.parse(await readFile(join(dir, 'base.json'), 'utf8')) as Record<string, unknown>;
    return { stdout: Number(b.stdout) || 0, stderr: Number(b.stderr) || 0 };
  } catch {
    return { stdout: 0, stderr: 0 };
  }
}
