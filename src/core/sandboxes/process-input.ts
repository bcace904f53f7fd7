import { AsyncQueue } from '../async-queue.js';
import { badRequest, conflict, SbxError } from '../errors.js';
import type { ExecControl, Provider } from '../ports/index.js';
import { terminalSize } from './exec.js';

/** Bytes of stdin a process may have queued and not yet taken (more → resource_limit, retry later). */
export const MAX_PENDING_STDIN = 1024 * 1024;
/** How long `…/resize` waits for the provider to apply the size before it answers anyway. */
const RESIZE_WAIT_MS = 5_000;

/**
 * How a background process is started beyond its exec request (DESIGN.md §14 fourth bullet, the
 * native API too): `stdin` opens a live stdin fed by `POST …/stdin` until `…/stdin/close`; `pty`
 * runs it in a terminal of that size (output then arrives merged as stdout), resized by
 * `POST …/resize`. Either one makes it an attached process (an exec held open by this control plane).
 * `attach` asks for that without them (E2B's commands: the fast path, no launch scripts). `user`
 * runs it as that uid/gid (E2B's `user`, when the sandbox has that account).
 */
export interface ProcessStartOptions {
  stdin?: boolean;
  pty?: { cols: number; rows: number };
  attach?: boolean;
  user?: { uid: number; gid: number };
}

/** Refuses what the provider cannot do before anything starts: a terminal needs the `tty` capability. */
export function checkStartOptions(provider: Provider, opts: ProcessStartOptions): void {
  if (opts.pty !== undefined) {
    terminalSize(opts.pty.cols, opts.pty.rows);
    if (!provider.capabilities.includes('tty'))
      throw new SbxError('not_implemented', `provider ${provider.name} cannot give a process a terminal (pty)`);
  }
}

/**
 * The live input of one attached process: its stdin queue (bounded by MAX_PENDING_STDIN bytes not
 * yet taken by the provider) and its controls (resize, signals).
 */
export class ProcessInput {
  readonly stdin: AsyncQueue<Uint8Array> | undefined;
  readonly controls = new AsyncQueue<ExecControl>();
  private pending = 0;
  private readonly resizing = new Set<() => void>();

  constructor(
    readonly processId: string,
    withStdin: boolean,
    readonly pty: boolean,
  ) {
    this.stdin = withStdin ? new AsyncQueue<Uint8Array>({ onShift: (c) => (this.pending -= c.byteLength) }) : undefined;
  }

  write(data: Uint8Array): void {
    const q = this.stdin;
    if (!q) throw conflict(`process ${this.processId} was not started with stdin`);
    if (q.isEnded) throw conflict(`the stdin of process ${this.processId} is closed`);
    if (data.byteLength === 0) return;
    if (this.pending + data.byteLength > MAX_PENDING_STDIN)
      throw new SbxError('resource_limit', `process ${this.processId} has ${this.pending} bytes of stdin not yet read; retry later`, {
        reason: 'stdin_backlog',
        retry_after_s: 1,
      });
    this.pending += data.byteLength;
    q.push(data);
  }

  close(): void {
    if (!this.stdin) throw conflict(`process ${this.processId} was not started with stdin`);
    this.stdin.end();
  }

  /**
   * Resolves once the provider applied the size (a command that asks after the answer sees it), the
   * process ended, or RESIZE_WAIT_MS passed (a provider that does not report it).
   */
  async resize(cols: number, rows: number): Promise<void> {
    if (!this.pty) throw badRequest(`process ${this.processId} runs without a terminal: nothing to resize`);
    const size = terminalSize(cols, rows);
    if (this.controls.isEnded) return;
    let done = () => {};
    const applied = new Promise<void>((resolve) => (done = resolve));
    const timer = setTimeout(done, RESIZE_WAIT_MS);
    this.resizing.add(done);
    this.controls.push({ type: 'resize', cols: size.cols, rows: size.rows, applied: done });
    await applied;
    clearTimeout(timer);
    this.resizing.delete(done);
  }

  /** The process ended: no more input. */
  end(): void {
    this.stdin?.end();
    this.controls.end();
    for (const r of this.resizing) r();
    this.resizing.clear();
  }
}
