import { SbxError } from '../errors.js';
import type { ConsoleLog, ConsoleQuery, FileInfo, OpenedFile } from '../ports/index.js';
import { bytesOnce, collectBytes, fileTooLarge } from './file-bytes.js';
import type { Caller } from './caller.js';
import type { ByteBudget } from './exec.js';
import { parseOctalMode, sandboxGlob, sandboxPath } from './paths.js';
import type { SandboxService } from './service.js';
import { WatchService } from './watch.js';

/**
 * File operations inside a sandbox (spec 4.2). Paths are validated and normalized here, once,
 * for every provider; providers still confine them to the sandbox.
 */
export class FileService {
  /** File watches (DESIGN §16): the one use case every watch transport builds on. */
  readonly watcher: WatchService;

  constructor(private readonly sandboxes: SandboxService) {
    this.watcher = new WatchService(sandboxes);
  }

  async write(id: string, path: string, content: Uint8Array, mode: string | undefined, caller: Caller): Promise<void> {
    const p = sandboxPath(path);
    const m = mode !== undefined ? parseOctalMode(mode) : undefined;
    const max = this.sandboxes.deps.settings.limits.max_file_bytes;
    if (content.byteLength > max) {
      throw new SbxError('payload_too_large', `file content is ${content.byteLength} bytes; the limit is ${max}`);
    }
    const { rec, provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    await provider.writeFile(runtimeId, p, content, m);
    this.publish('file.written', rec.id, rec.owner_id, { path: p, size: content.byteLength });
  }

  /**
   * A write whose bytes arrive as a stream (a large upload). A provider that streams writes gets
   * them as they come, so memory stays flat; others get them collected first, each byte held
   * against `budget` (the server's in-flight bytes: over it → 503 and nothing written). More than
   * `max_file_bytes` → 413 and nothing written. `mode` is read once the body has ended (a JSON
   * upload may name it after the content); a body that fails leaves no file, not even a partial one.
   */
  async writeStream(
    id: string,
    path: string,
    body: AsyncIterable<Uint8Array>,
    mode: () => string | undefined,
    caller: Caller,
    budget?: ByteBudget,
  ): Promise<void> {
    const p = sandboxPath(path);
    const max = this.sandboxes.deps.settings.limits.max_file_bytes;
    const { rec, provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    let size = 0;
    const counted = (async function* () {
      for await (const chunk of body) {
        size += chunk.byteLength;
        if (size > max) throw new SbxError('payload_too_large', `file content is more than ${max} bytes; the limit is ${max}`);
        yield chunk;
      }
    })();
    const octal = () => {
      const m = mode();
      return m !== undefined ? parseOctalMode(m) : undefined;
    };
    if (provider.writeFileStream) {
      await provider.writeFileStream(runtimeId, p, counted, octal);
    } else {
      let held = 0;
      try {
        const bytes = await collectBytes(counted, async (n) => {
          const ok = budget ? await budget.take(n) : true;
          if (!ok)
            throw new SbxError('unavailable', 'the server holds too much in-flight data right now; retry later (server.max_inflight_mb)', {
              retry_after_s: 1,
            });
          held += n;
        });
        await provider.writeFile(runtimeId, p, bytes, octal());
      } finally {
        budget?.give(held);
      }
    }
    this.publish('file.written', rec.id, rec.owner_id, { path: p, size });
  }

  /**
   * Opens a file for reading: its size, then exactly that many bytes. A provider that streams
   * hands the bytes on as the backend sends them (memory stays flat however large the file);
   * others read the file whole first. `file.read` is published once the body was delivered.
   */
  async open(id: string, path: string, caller: Caller): Promise<OpenedFile> {
    const p = sandboxPath(path);
    const { rec, provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    const max = this.sandboxes.deps.settings.limits.max_file_bytes;
    const read = (size: number) => this.publish('file.read', rec.id, rec.owner_id, { path: p, size });
    // One provider call, no stat first: the provider refuses a directory or an oversized file itself.
    if (provider.openFile) {
      const file = await provider.openFile(runtimeId, p, undefined, max);
      if (file.size > max) {
        await file.body[Symbol.asyncIterator]().return?.();
        throw fileTooLarge(file.size, max);
      }
      return { size: file.size, body: whenDelivered(file.body, () => read(file.size)) };
    }
    const data = await provider.readFile(runtimeId, p, undefined, max);
    if (data.byteLength > max) throw fileTooLarge(data.byteLength, max);
    read(data.byteLength);
    return { size: data.byteLength, body: bytesOnce(data) };
  }

  async remove(id: string, path: string, recursive: boolean, caller: Caller): Promise<void> {
    const p = sandboxPath(path);
    if (p === '/') throw new SbxError('bad_request', 'refusing to delete the sandbox root');
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    await provider.deleteFile(runtimeId, p, recursive);
  }

  async list(id: string, path: string | undefined, caller: Caller): Promise<FileInfo[]> {
    const p = sandboxPath(path ?? '/');
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    const items = await provider.listFiles(runtimeId, p);
    return [...items].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async move(id: string, oldPath: string, newPath: string, caller: Caller): Promise<void> {
    const from = sandboxPath(oldPath, 'old_path');
    const to = sandboxPath(newPath, 'new_path');
    if (from === '/' || to === '/') throw new SbxError('bad_request', 'cannot move the sandbox root');
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    await provider.moveFile(runtimeId, from, to);
  }

  async chmod(id: string, path: string, mode: string, caller: Caller): Promise<void> {
    const p = sandboxPath(path);
    const m = parseOctalMode(mode);
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    await provider.chmod(runtimeId, p, m);
  }

  async stat(id: string, path: string, caller: Caller): Promise<FileInfo> {
    const p = sandboxPath(path);
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    return provider.stat(runtimeId, p);
  }

  async glob(id: string, pattern: string, caller: Caller): Promise<string[]> {
    const g = sandboxGlob(pattern);
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    return [...(await provider.glob(runtimeId, g))].sort();
  }

  /** Console lines and the cursor of the last one (see Provider.logs). */
  async logs(id: string, query: ConsoleQuery, caller: Caller): Promise<ConsoleLog> {
    const { provider, runtimeId } = await this.sandboxes.resolveRuntime(id, caller);
    return provider.logs(runtimeId, query);
  }

  private publish(type: 'file.written' | 'file.read', sandboxId: string, ownerId: string | null, data: Record<string, unknown>) {
    this.sandboxes.deps.bus.publish({
      type,
      sandbox_id: sandboxId,
      owner_id: ownerId ?? undefined,
      worker_id: this.sandboxes.deps.settings.worker_id,
      data,
    });
  }
}

/** The same bytes, calling `delivered` once the last one was taken; an early `return()` is passed on. */
function whenDelivered(body: AsyncIterable<Uint8Array>, delivered: () => void): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      return {
        async next() {
          const r = await it.next();
          if (r.done) delivered();
          return r;
        },
        async return() {
          await it.return?.();
          return { done: true, value: undefined };
        },
      };
    },
  };
}
