import type Docker from 'dockerode';
import { ConsoleRing } from '../shared/console-ring.js';
import { call } from './errors.js';
import { demuxBuffer } from './frames.js';

/** Most console rings kept at once; the least recently written goes first. */
const MAX_RINGS = 1024;

/**
 * Console of docker sandboxes: the container's own output (engine logs of PID 1) followed by
 * the output of execs run through this provider, kept in a bounded ring per runtime.
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

  /** Last `lines` lines, oldest first; throws when the container is gone. */
  async logs(runtimeId: string, lines: number, signal?: AbortSignal): Promise<string[]> {
    if (lines <= 0) {
      await call('logs', (s) => this.docker.getContainer(runtimeId).inspect({ abortSignal: s }), signal);
      return [];
    }
    const raw = await call(
      'logs',
      (s) => this.docker.getContainer(runtimeId).logs({ stdout: true, stderr: true, follow: false, tail: lines, abortSignal: s }) as unknown as Promise<Buffer>,
      signal,
    );
    const own = new ConsoleRing(lines);
    for (const f of demuxBuffer(Buffer.isBuffer(raw) ? raw : Buffer.from(String(raw)))) own.append(f.data, f.stream);
    own.flush();
    const execLines = this.rings.get(runtimeId)?.tail(lines) ?? [];
    return [...own.tail(lines), ...execLines].slice(-lines);
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
