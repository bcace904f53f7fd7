/**
 * Pause, resume and fork (DESIGN.md §16) in the typed client: `client.lifecycle.pause(id)`,
 * `.resume(id)`, `.fork(id, {count})`; `client.pause`/`resume`/`fork` delegate here.
 */
import { type Http, spawnHeaders } from './http.js';
import type { ForkRequest, RequestOptions, Sandbox, SpawnOptions } from './types.js';

const enc = encodeURIComponent;

export class PauseForkApi {
  constructor(private readonly http: Http) {}

  /** `POST …/pause`: every process frozen, memory kept; 409 while an exec or stream is in flight. */
  pause(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json('POST', `/api/v1/sandboxes/${enc(id)}/pause`, { signal: opts.signal });
  }

  /** `POST …/resume`: running again (an exec, file or process call resumes it too). */
  resume(id: string, opts: RequestOptions = {}): Promise<Sandbox> {
    return this.http.json('POST', `/api/v1/sandboxes/${enc(id)}/resume`, { signal: opts.signal });
  }

  /**
   * Forks a running sandbox: `count` (1–10) new sandboxes, each starting from a copy of its
   * filesystem at this moment, on the same node; all or none. With `idempotencyKey` a retry
   * answers the same forks.
   */
  async fork(id: string, req: ForkRequest = {}, opts: SpawnOptions = {}): Promise<Sandbox[]> {
    const body = await this.http.json<{ sandboxes: Sandbox[] }>('POST', `/api/v1/sandboxes/${enc(id)}/fork`, {
      body: req,
      signal: opts.signal,
      headers: spawnHeaders(opts),
    });
    return body.sandboxes;
  }
}
