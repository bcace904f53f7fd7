/**
 * File operations through sbx-agent (DESIGN §11, docs/agent.md): a write, a stat and a streaming
 * read, each in one round trip. Errors the engine paths would word differently (permissions,
 * special files) answer AgentUnavailable, so the caller falls back to the engine.
 */
import { posix } from 'node:path';
import { badRequest, notFound, SbxError } from '../../../core/errors.js';
import type { FileInfo, OpenedFile } from '../../../core/ports/index.js';
import { fileTooLarge } from '../../../core/sandboxes/file-bytes.js';
import { formatMode } from '../shared/file-mode.js';
import { AgentUnavailable, agentGone, cString, E, type Frame, MAX_QUEUED, u32 } from './agent.js';
import { type AgentConnection, Inbox, MAX_CHUNK, R, T } from './agent-conn.js';

function fileError(errno: number, what: string, path: string, extra: { size?: number; max?: number } = {}): Error {
  switch (errno) {
    case E.ENOENT:
      return notFound(`${path} not found`);
    case E.ENOTDIR:
      return badRequest(`${what}: not a directory`);
    case E.EISDIR:
      return badRequest(`${path} is a directory`);
    case E.EFBIG:
      return fileTooLarge(extra.size ?? 0, extra.max ?? 0);
  }
  // Permissions (the engine paths act as the daemon), special files, anything else: the engine serves.
  return new AgentUnavailable();
}

/** One request whose answer is one frame (write, stat). */
function oneAnswer(conn: AgentConnection): { id: number; answer: Promise<{ type: number; payload: Buffer }> } {
  let resolve!: (v: { type: number; payload: Buffer }) => void;
  let reject!: (e: Error) => void;
  const answer = new Promise<{ type: number; payload: Buffer }>((res, rej) => ((resolve = res), (reject = rej)));
  const id = conn.open({
    frame: (type, payload) => resolve({ type, payload: Buffer.from(payload) }),
    lost: () => reject(new AgentUnavailable()),
  });
  return { id, answer };
}

/** A write in one round trip: open, bytes, end pipelined; the agent renames a temp file into place. */
export async function agentWrite(conn: AgentConnection, path: string, content: Uint8Array, mode: number | undefined): Promise<void> {
  const { id, answer } = oneAnswer(conn);
  try {
    conn.send(id, T.WRITE, u32(mode === undefined ? 0xffffffff : mode & 0o7777), cString(path));
    for (let at = 0; at < content.byteLength; at += MAX_CHUNK) {
      if (!conn.send(id, T.WDATA, content.subarray(at, at + MAX_CHUNK))) await conn.drained();
    }
    conn.send(id, T.WEND);
    const a = await answer;
    if (a.type === R.END) return;
    if (a.type === R.ERROR) throw fileError(a.payload.readUInt32LE(4), `write ${path}`, path);
    throw new AgentUnavailable();
  } finally {
    conn.release(id);
  }
}

export async function agentStat(conn: AgentConnection, path: string): Promise<FileInfo> {
  const { id, answer } = oneAnswer(conn);
  try {
    conn.send(id, T.STAT, cString(path));
    const a = await answer;
    if (a.type === R.ERROR) {
      const errno = a.payload.readUInt32LE(4);
      if (errno === E.ENOENT) throw notFound(`stat ${path}: no such file or directory`);
      if (errno === E.ENOTDIR) throw badRequest(`stat ${path}: not a directory`);
      throw new AgentUnavailable();
    }
    if (a.type !== R.STAT) throw new AgentUnavailable();
    const raw = a.payload.readUInt32LE(0);
    return {
      name: path === '/' ? '/' : posix.basename(path),
      path,
      size: Number(a.payload.readBigUInt64LE(4)),
      is_dir: (raw & 0o170000) === 0o040000,
      mod_time: new Date(Number(a.payload.readBigInt64LE(12)) * 1000).toISOString(),
      mode: formatMode(raw),
    };
  } finally {
    conn.release(id);
  }
}

/** A streaming read: the size first (refusals before any byte), then chunks pulled with credit. */
export async function agentOpen(conn: AgentConnection, path: string, maxBytes: number | undefined): Promise<OpenedFile> {
  const inbox = new Inbox<Frame>();
  const id = conn.open({
    frame: (type, payload) => {
      inbox.push({ type, payload });
      if (inbox.bytes > MAX_QUEUED) conn.close();
    },
    lost: () => inbox.push({ lost: true }),
  });
  const max = maxBytes ?? Number.MAX_SAFE_INTEGER;
  const head = Buffer.alloc(8);
  head.writeBigUInt64LE(BigInt(max), 0);
  let first: Frame | undefined;
  try {
    conn.send(id, T.READ, head, cString(path));
    first = await inbox.next();
  } catch (err) {
    conn.release(id);
    throw err;
  }
  if (!first || 'lost' in first || (first.type !== R.SIZE && first.type !== R.ERROR)) {
    conn.release(id);
    throw new AgentUnavailable();
  }
  if (first.type === R.ERROR) {
    conn.release(id);
    throw fileError(first.payload.readUInt32LE(4), `read ${path}`, path, { size: Number(first.payload.readBigUInt64LE(8)), max });
  }
  const size = Number(first.payload.readBigUInt64LE(0));
  async function* body(): AsyncGenerator<Uint8Array> {
    let ended = false;
    try {
      for (;;) {
        const f = await inbox.next();
        if (!f) continue;
        if ('lost' in f) throw agentGone(`read ${path}`);
        if (f.type === R.DATA) {
          yield f.payload;
          conn.send(id, T.CREDIT, u32(f.payload.byteLength));
        } else if (f.type === R.END) {
          ended = true;
          return;
        } else if (f.type === R.ERROR) {
          ended = true;
          throw new SbxError('provider_error', `read ${path}: failed`);
        }
      }
    } finally {
      if (!ended) conn.send(id, T.CANCEL);
      conn.release(id);
    }
  }
  return { size, body: body() };
}
