import type Docker from 'dockerode';
import type { ConsoleLog, ConsoleQuery } from '../../../core/ports/index.js';
import { ConsoleRing } from '../shared/console-ring.js';
import { call } from './errors.js';
import { demuxBuffer } from './frames.js';

/** Most console rings kept at once; the least recently written goes first. */
const MAX_RINGS = 1024;

/**
 * Console of docker sandboxes: the container's own output (engine logs of PID 1) followed by
 * the output of execs run through this provider, kept in a bounded ring per runtime.
 *
 * Cursors number exec output only. The engine keeps PID 1's output and can only hand back its
 * tail, with nothing to number it by, so those lines appear in plain tail reads (before the exec
 * lines) and never in reads `after` a cursor: following a console sees new exec output, not new
 * output of PID 1 (the sandbox's idle process, which rarely prints).
 */
export class DockerConsole {
  private readonly rings = new Map<string, ConsoleRing>();

  constructor(private readonly docker: Docker) {}

  /** Capture hook for one exec: feeds the runtime's ring. */
  capture(runtimeId: string): { onOutput: (stream: 'stdout' | 'stderr', data: Uint8Array) => void; end: () => void } {
    const ring = this.ring(runtimeId);
    // A per-exec source key keeps concurrent execs' partial lines apart.
    const tag = Math.random().toString(36).slice(2);
    return {
      onOutput: (stream, data) => ring.append(data, `${tag}:${stream}`),
      end: () => {
        ring.flush(`${tag}:stdout`);
        ring.flush(`${tag}:stderr`);
      },
    };
  }

  /** Console lines (see the class note for what a cursor covers); throws when the container is gone. */
  async logs(runtimeId: string, query: ConsoleQuery, signal?: AbortSignal): Promise<ConsoleLog> {
    const { lines } = query;
    if (lines <= 0 || query.after !== undefined) {
      await call('logs', (s) => this.docker.getContainer(runtimeId).inspect({ abortSignal: s }), signal);
      return this.rings.get(runtimeId)?.read(query) ?? { lines: [], cursor: 0 };
    }
    const raw = await call(
      'logs',
      (s) =>
        this.docker
          .getContainer(runtimeId)
          .logs({ stdout: true, stderr: true, follow: false, tail: lines, abortSignal: s }) as unknown as Promise<Buffer>,
      signal,
    );
    const own = new ConsoleRing(lines);
    for (const f of demuxBuffer(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)))) own.append(f.data, f.stream);
    own.flush();
    const exec = this.rings.get(runtimeId)?.read({ lines }) ?? { lines: [], cursor: 0 };
    return { lines: [...own.tail(lines), ...exec.lines].slice(-lines), cursor: exec.cursor };
  }

  forget(runtimeId: string): void {
    this.rings.delete(runtimeId);
  }

  private ring(runtimeId: string): ConsoleRing {
    let ring = this.rings.get(runtimeId);
    if (ring) {
      // Refresh recency (Map keeps insertion order).
      this.rings.delete(runtimeId);
    } else {
      ring = new ConsoleRing();
      if (this.rings.size >= MAX_RINGS) this.rings.delete(this.rings.keys().next().value!);
    }
    this.rings.set(runtimeId, ring);
    return ring;
  }
}
