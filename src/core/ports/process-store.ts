/**
 * Background processes (DESIGN.md §10): their records (a Store role) and their output logs (kept
 * on the disk of the process that follows them). Re-exported by ports/index.ts.
 */

export type ProcessState = 'running' | 'exited' | 'killed' | 'timeout';

/**
 * How a process runs. `detached`: started inside the sandbox under `setsid`, its output going to
 * files there, so it outlives the control plane and is followed again after a restart (providers
 * with the `detach` capability). `attached`: an exec this process holds open; it ends with it.
 */
export type ProcessRunner = 'detached' | 'attached';

export interface ProcessRecord {
  /** `p-` + 12 base-36 characters. */
  id: string;
  sandbox_id: string;
  command: string;
  args: string[];
  mode: 'shell' | 'argv';
  state: ProcessState;
  /** Null while running, and for a process that vanished without a status. */
  exit_code: number | null;
  started_at: string;
  ended_at: string | null;
  runner: ProcessRunner;
  /** The control-plane replica that follows it and keeps its output log. */
  holder: string;
  /** When it is killed as `timeout`; null = no deadline. */
  deadline_at: string | null;
}

export interface ProcessFilter {
  sandbox_id?: string;
  states?: ProcessState[];
  holder?: string;
}

export interface ProcessStore {
  insertProcess(rec: ProcessRecord): Promise<void>;
  /** Applies the patch; null if the id is unknown. */
  updateProcess(id: string, patch: Partial<Omit<ProcessRecord, 'id' | 'sandbox_id'>>): Promise<ProcessRecord | null>;
  getProcess(id: string): Promise<ProcessRecord | null>;
  /** Sorted by started_at, then id. */
  listProcesses(filter?: ProcessFilter): Promise<ProcessRecord[]>;
  deleteProcess(id: string): Promise<boolean>;
}

export type OutputStream = 'stdout' | 'stderr';

/** Bytes of one stream at `offset` in the process's output (both streams counted in arrival order). */
export interface OutputChunk {
  stream: OutputStream;
  data: Uint8Array;
  offset: number;
}

/**
 * One process's output log: append-only, byte offsets over both streams in arrival order, keeping
 * the newest `limit` bytes (older ones dropped whole segments at a time). One writer at a time.
 */
export interface ProcessLog {
  /** Offset of the first byte still kept (0 until something was dropped). */
  readonly start: number;
  /** Offset just past the last byte (= bytes ever appended). */
  readonly end: number;
  /** Bytes ever appended per stream (a detached process's output files are followed from these). */
  readonly counts: Readonly<Record<OutputStream, number>>;
  append(stream: OutputStream, data: Uint8Array): Promise<void>;
  /** Chunks from `offset` (at least `start`), at most about `maxBytes`; [] at the end. */
  read(offset: number, maxBytes: number): Promise<OutputChunk[]>;
  close(): Promise<void>;
}

export interface ProcessLogs {
  /** Opens (creating when asked) the log of a process; null when it is not kept here. */
  open(processId: string, create: boolean): Promise<ProcessLog | null>;
  remove(processId: string): Promise<void>;
}
