/**
 * The host side of the guest agent protocol (agent-protocol.ts, docs/providers/firecracker.md):
 * exec with streaming output and file operations, one vsock connection per operation.
 */
import type { Socket } from 'node:net';
import { ERROR_CODES, SbxError, type ErrorCode } from '../../../core/errors.js';
import type { ExecEvent, ExecSpec, FileInfo, OpenedFile } from '../../../core/ports/index.js';
import { planGlob } from '../shared/glob.js';
import { buildShellCommand } from '../../../shared/shell.js';
import { chunks, encodeFrame, type Frame, FrameReader } from './agent-protocol.js';

/** Codes a guest may report; anything else becomes provider_error. */
const GUEST_CODES = new Set<ErrorCode>(['bad_request', 'not_found', 'conflict', 'payload_too_large', 'forbidden']);
const GLOB_LIMIT = 10_000;
/** After a cancel, how long the guest gets to report the killed command's exit. */
const KILL_GRACE_MS = 2_000;

export interface AgentClientOptions {
  /** Opens a connection to the agent (vsock handshake done). */
  connect: (signal?: AbortSignal) => Promise<Socket>;
  /** Deadline of one answer of a file operation. */
  timeoutMs: number;
}

const tooLarge = (size: number, maxBytes: number) => new SbxError('payload_too_large', `file is ${size} bytes; the limit is ${maxBytes}`);

function guestError(h: Frame['header'], maxBytes?: number): SbxError {
  if (h.code === 'payload_too_large' && typeof h.size === 'number' && maxBytes !== undefined) return tooLarge(h.size, maxBytes);
  const code =
    typeof h.code === 'string' && (ERROR_CODES as readonly string[]).includes(h.code) && GUEST_CODES.has(h.code as ErrorCode)
      ? (h.code as ErrorCode)
      : 'provider_error';
  const message = typeof h.message === 'string' ? h.message.slice(0, 500) : 'the guest agent reported an error';
  return new SbxError(code, message);
}

function unexpected(what: string, h: Frame['header'] | undefined): SbxError {
  return new SbxError('provider_error', `the guest agent answered ${what} with ${h ? JSON.stringify(String(h.type)) : 'nothing'}`);
}

function toFileInfo(v: unknown): FileInfo {
  const o = v as Record<string, unknown> | null;
  if (
    !o ||
    typeof o.name !== 'string' ||
    typeof o.path !== 'string' ||
    typeof o.size !== 'number' ||
    typeof o.is_dir !== 'boolean' ||
    typeof o.mod_time !== 'string' ||
    typeof o.mode !== 'string' ||
    !/^0[0-7]{3,4}$/.test(o.mode)
  ) {
    throw new SbxError('provider_error', 'the guest agent sent a malformed file entry');
  }
  return { name: o.name, path: o.path, size: o.size, is_dir: o.is_dir, mod_time: o.mod_time, mode: o.mode };
}

export class AgentClient {
  constructor(private readonly opts: AgentClientOptions) {}

  private async open(header: Record<string, unknown>, signal?: AbortSignal): Promise<{ sock: Socket; reader: FrameReader }> {
    const sock = await this.opts.connect(signal);
    const reader = new FrameReader(sock);
    sock.write(encodeFrame(header));
    return { sock, reader };
  }

  /** One request, one answer (`ok` or `error`). */
  private async simple(header: Record<string, unknown>, signal?: AbortSignal): Promise<Frame['header']> {
    const { sock, reader } = await this.open(header, signal);
    try {
      const f = await reader.next(this.opts.timeoutMs, signal);
      if (f?.header.type === 'error') throw guestError(f.header);
      if (f?.header.type !== 'ok') throw unexpected(String(header.op), f?.header);
      return f.header;
    } finally {
      sock.destroy();
    }
  }

  /** `ping` → `ok`: the agent is up. */
  async ping(signal?: AbortSignal): Promise<void> {
    await this.simple({ op: 'ping' }, signal);
  }

  async writeFile(path: string, content: Uint8Array, mode: number | undefined, signal?: AbortSignal): Promise<void> {
    const { sock, reader } = await this.open({ op: 'write', path, size: content.length, ...(mode === undefined ? {} : { mode }) }, signal);
    try {
      for (const part of chunks(content)) sock.write(encodeFrame({ type: 'data' }, part));
      sock.write(encodeFrame({ type: 'end' }));
      const f = await reader.next(this.opts.timeoutMs, signal);
      if (f?.header.type === 'error') throw guestError(f.header);
      if (f?.header.type !== 'ok') throw unexpected('write', f?.header);
    } finally {
      sock.destroy();
    }
  }

  async openFile(path: string, signal?: AbortSignal, maxBytes?: number): Promise<OpenedFile> {
    const { sock, reader } = await this.open({ op: 'read', path, ...(maxBytes === undefined ? {} : { max_bytes: maxBytes }) }, signal);
    const first = await reader.next(this.opts.timeoutMs, signal).catch((err: unknown) => {
      sock.destroy();
      throw err;
    });
    if (first?.header.type !== 'file' || typeof first.header.size !== 'number') {
      sock.destroy();
      throw first?.header.type === 'error' ? guestError(first.header, maxBytes) : unexpected('read', first?.header);
    }
    const size = first.header.size;
    if (maxBytes !== undefined && size > maxBytes) {
      sock.destroy();
      throw tooLarge(size, maxBytes);
    }
    const timeoutMs = this.opts.timeoutMs;
    async function* body(): AsyncGenerator<Uint8Array> {
      let got = 0;
      try {
        for (;;) {
          const f = await reader.next(timeoutMs, signal);
          if (f?.header.type === 'data') {
            got += f.data.length;
            if (got > size) throw new SbxError('provider_error', 'the guest agent sent more bytes than the file has');
            if (f.data.length) yield f.data;
          } else if (f?.header.type === 'end') {
            if (got !== size) throw new SbxError('provider_error', 'the guest agent sent fewer bytes than the file has');
            return;
          } else if (f?.header.type === 'error') throw guestError(f.header);
          else throw unexpected('read', f?.header);
        }
      } finally {
        sock.destroy();
      }
    }
    return { size, body: body() };
  }

  async readFile(path: string, signal?: AbortSignal, maxBytes?: number): Promise<Uint8Array> {
    const opened = await this.openFile(path, signal, maxBytes);
    const parts: Uint8Array[] = [];
    for await (const c of opened.body) parts.push(c);
    return Buffer.concat(parts);
  }

  async stat(path: string, signal?: AbortSignal): Promise<FileInfo> {
    return toFileInfo((await this.simple({ op: 'stat', path }, signal)).info);
  }

  async listFiles(path: string, signal?: AbortSignal): Promise<FileInfo[]> {
    const h = await this.simple({ op: 'list', path }, signal);
    if (!Array.isArray(h.entries)) throw new SbxError('provider_error', 'the guest agent sent a listing that is not a list');
    return h.entries.map(toFileInfo);
  }

  async deleteFile(path: string, recursive: boolean, signal?: AbortSignal): Promise<void> {
    await this.simple({ op: 'delete', path, recursive }, signal);
  }

  async moveFile(from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.simple({ op: 'move', from, to }, signal);
  }

  async chmod(path: string, mode: number, signal?: AbortSignal): Promise<void> {
    await this.simple({ op: 'chmod', path, mode }, signal);
  }

  /** Walked on the host with `list`: the protocol needs no glob of its own. */
  async glob(pattern: string, signal?: AbortSignal): Promise<string[]> {
    const plan = planGlob(pattern);
    const found: string[] = [];
    let base: FileInfo;
    try {
      base = await this.stat(plan.base, signal);
    } catch (err) {
      if (err instanceof SbxError && err.code === 'not_found') return [];
      throw err;
    }
    if (plan.regex.test(base.path)) found.push(base.path);
    const walk = async (dir: string, depth: number): Promise<void> => {
      if (depth > plan.depth) return;
      for (const e of await this.listFiles(dir, signal)) {
        if (found.length >= GLOB_LIMIT) throw new SbxError('resource_limit', `the pattern matches more than ${GLOB_LIMIT} paths`);
        if (plan.regex.test(e.path)) found.push(e.path);
        if (e.is_dir) await walk(e.path, depth + 1);
      }
    };
    if (base.is_dir) await walk(base.path, 1);
    return found.sort();
  }

  exec(spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
    const self = this;
    return {
      async *[Symbol.asyncIterator]() {
        if (spec.mode === 'argv' && spec.command.length === 0) throw new SbxError('bad_request', 'command is empty');
        const argv = spec.mode === 'shell' ? ['/bin/sh', '-c', buildShellCommand(spec.command, spec.args)] : [spec.command, ...spec.args];
        const header = {
          op: 'exec',
          argv,
          env: spec.env,
          ...(spec.workdir ? { cwd: spec.workdir } : {}),
          ...(spec.user ? { uid: spec.user.uid, gid: spec.user.gid } : {}),
        };
        // Cancelled before it started: nothing ran, nothing to report.
        if (signal.aborted) return;
        let opened: { sock: Socket; reader: FrameReader };
        try {
          opened = await self.open(header, signal);
        } catch (err) {
          if (signal.aborted) return;
          throw err;
        }
        const { sock, reader } = opened;
        const send = (h: Record<string, unknown>, data?: Uint8Array) => {
          if (!sock.destroyed && sock.writable) sock.write(encodeFrame(h, data));
        };
        let finished = false;
        const stdin = spec.stdin;
        let stdinIter: AsyncIterator<Uint8Array> | undefined;
        const pumpStdin = async () => {
          if (stdin === undefined) return send({ type: 'stdin_end' });
          if (stdin instanceof Uint8Array) {
            for (const part of chunks(stdin)) send({ type: 'stdin' }, part);
            return send({ type: 'stdin_end' });
          }
          stdinIter = stdin[Symbol.asyncIterator]();
          for (;;) {
            const r = await stdinIter.next();
            if (r.done || finished) break;
            for (const part of chunks(r.value)) send({ type: 'stdin' }, part);
          }
          if (!finished) send({ type: 'stdin_end' });
        };
        const pumpControls = async () => {
          if (!spec.controls) return;
          for await (const c of spec.controls) {
            if (finished) break;
            if (c.type === 'signal') send({ type: 'signal', signal: c.signal });
            // No terminal in this protocol: resize has nothing to act on.
          }
        };
        void pumpStdin().catch(() => send({ type: 'stdin_end' }));
        void pumpControls().catch(() => undefined);
        const onAbort = () => send({ type: 'signal', signal: 'SIGKILL' });
        signal.addEventListener('abort', onAbort, { once: true });
        try {
          for (;;) {
            let f: Frame | null;
            try {
              f = await reader.next(signal.aborted ? KILL_GRACE_MS : Infinity, signal.aborted ? undefined : signal);
            } catch (err) {
              // The caller's cancel: the kill was sent; wait a little for its exit, else just end.
              if (signal.aborted && err instanceof SbxError && err.code === 'timeout') {
                const last = await reader.next(KILL_GRACE_MS).catch(() => null);
                if (last?.header.type === 'exit' && typeof last.header.exit_code === 'number')
                  yield { stream: 'exit', exit_code: last.header.exit_code };
                return;
              }
              throw err;
            }
            if (!f) throw new SbxError('provider_error', 'the guest agent closed the exec before its exit');
            const t = f.header.type;
            if (t === 'stdout' || t === 'stderr') {
              if (f.data.length) yield { stream: t, data: f.data };
            } else if (t === 'exit' && typeof f.header.exit_code === 'number') {
              yield { stream: 'exit', exit_code: f.header.exit_code };
              return;
            } else if (t === 'error') throw guestError(f.header);
            else throw unexpected('exec', f.header);
          }
        } finally {
          finished = true;
          signal.removeEventListener('abort', onAbort);
          sock.destroy();
          void stdinIter?.return?.().catch(() => undefined);
        }
      },
    };
  }
}
