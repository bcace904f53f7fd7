import type Docker from 'dockerode';
import { SbxError } from '../../../core/errors.js';
import type { ExecSpec } from '../../../core/ports/index.js';
import { AgentUnavailable, type DockerAgents } from './agent.js';
import { agentExec } from './agent-exec.js';
import { killMarkedViaEngine, streamExec } from './exec.js';

export interface RunResult {
  exitCode: number;
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  stdin?: Uint8Array;
  signal?: AbortSignal;
  /** Bound on stdout bytes kept; more is an error, not a silent truncation. Default 64 MiB. */
  maxBytes?: number;
  timeoutMs?: number;
  workdir?: string;
  /** Run as this uid/gid instead of the container's user. */
  user?: { uid: number; gid: number };
}

/**
 * Runs an argv (never a shell string built from caller data) to completion and collects its
 * output, bounded in time and size. The helper behind every file operation that is not an
 * archive transfer.
 */
export async function runArgv(docker: Docker, runtimeId: string, argv: string[], opts: RunOptions = {}): Promise<RunResult> {
  const max = opts.maxBytes ?? 64 * 1024 * 1024;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(new Error('deadline')), opts.timeoutMs ?? 60_000);
  const onCancel = () => ac.abort(opts.signal?.reason);
  opts.signal?.addEventListener('abort', onCancel, { once: true });
  const out: Buffer[] = [];
  let outBytes = 0;
  let err = '';
  let exitCode: number | undefined;
  try {
    const [command, ...args] = argv;
    for await (const ev of streamExec(
      docker,
      runtimeId,
      {
        command: command!,
        args,
        mode: 'argv',
        env: { LC_ALL: 'C' },
        workdir: opts.workdir ?? '/',
        stdin: opts.stdin,
        ...(opts.user ? { user: opts.user } : {}),
      },
      ac.signal,
    )) {
      if (ev.stream === 'exit') exitCode = ev.exit_code;
      else if (ev.stream === 'stdout') {
        outBytes += ev.data.byteLength;
        if (outBytes > max) throw new SbxError('payload_too_large', `output exceeds ${max} bytes`);
        out.push(Buffer.from(ev.data));
      } else if (err.length < 4096) {
        err += Buffer.from(ev.data).toString('utf8');
      }
    }
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener('abort', onCancel);
  }
  if (exitCode === undefined) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    throw new SbxError('timeout', 'file operation did not finish in time');
  }
  return { exitCode, stdout: Buffer.concat(out), stderr: err };
}

/** Bound on what a short command of the provider's own may print. */
const MAX_RUN_BYTES = 16 * 1024 * 1024;

/** A short command as the container's user, no console capture: through the agent (a few ms) when up, else the engine. */
export async function runAsContainer(
  docker: Docker,
  agents: DockerAgents | undefined,
  runtimeId: string,
  argv: string[],
  signal?: AbortSignal,
): Promise<Buffer> {
  const bound = AbortSignal.any([AbortSignal.timeout(10_000), ...(signal ? [signal] : [])]);
  const conn = agents ? await agents.get(runtimeId) : undefined;
  if (conn && !bound.aborted) {
    const out: Buffer[] = [];
    let bytes = 0;
    const spec: ExecSpec = { command: argv[0]!, args: argv.slice(1), mode: 'argv', env: { LC_ALL: 'C' }, workdir: '/' };
    try {
      for await (const ev of agentExec(conn, spec, bound, undefined, (m) => killMarkedViaEngine(docker, runtimeId, m)))
        if (ev.stream === 'stdout') {
          if ((bytes += ev.data.byteLength) > MAX_RUN_BYTES) throw new SbxError('payload_too_large', `${argv[0]} printed too much`);
          out.push(Buffer.from(ev.data));
        }
      if (bound.aborted) throw new SbxError('timeout', `${argv[0]} did not finish in time`);
      return Buffer.concat(out);
    } catch (err) {
      if (!(err instanceof AgentUnavailable)) throw err;
    }
  }
  return (await runArgv(docker, runtimeId, argv, { signal: bound, maxBytes: MAX_RUN_BYTES })).stdout;
}
