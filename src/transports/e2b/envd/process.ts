import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import { SbxError } from '../../../core/errors.js';
import { EXEC_SIGNALS, type ExecSignal, type ProcessRecord } from '../../../core/ports/index.js';
import type { ProcessOutputItem, ProcessService } from '../../../core/sandboxes/processes.js';
import type { EnvdDeps } from './deps.js';
import { toConnectError } from './errors.js';
import {
  type ProcessEvent_EndEventSchema,
  type Process,
  type ProcessSelector,
  Signal,
  type StartRequest,
  type ProcessEventSchema,
} from './gen/process/process_pb.js';
import { keepaliveMs, withKeepalive } from './keepalive.js';
import { pidOf, processByPid } from './pids.js';
import { ProcessTags } from './tags.js';
import type { EnvdTarget } from './target.js';
import { accountOf, userOf } from './users.js';

type Resolve = (ctx: HandlerContext) => Promise<EnvdTarget>;

/**
 * E2B's `process.Process` service over sbx's background processes (DESIGN.md §14): every `Start`
 * is a process (so `list`, `connect`, stdin, signals and `kill` work for foreground and
 * background commands alike, as E2B's SDK sends both the same way), run as given (`/bin/bash -l
 * -c CMD`) as the named user when the sandbox has that account. Output is streamed from the
 * process's log as it is written; the process outlives a client that goes away.
 */
export function processService(deps: EnvdDeps, resolve: Resolve): Partial<ServiceImpl<typeof Process>> {
  const tags = new ProcessTags();
  const selected = (t: EnvdTarget, sel: ProcessSelector | undefined) => select(svc(), tags, t, sel);
  const svc = (): ProcessService => {
    if (!deps.processes) throw new SbxError('not_implemented', 'processes are not available on this server');
    return deps.processes;
  };
  const guard = <A extends unknown[], R>(fn: (...a: A) => Promise<R>) => {
    return async (...a: A): Promise<R> => {
      try {
        return await fn(...a);
      } catch (err) {
        throw toConnectError(err);
      }
    };
  };
  return {
    async *start(req, ctx) {
      const { t, rec } = await guard(startProcess)(deps, svc(), req, ctx, resolve);
      if (req.tag !== undefined) tags.set(t.rec.id, rec.id, req.tag);
      yield { event: { event: { case: 'start', value: { pid: pidOf(rec.id) } } } };
      for await (const event of events(svc(), t, rec, ctx)) yield { event };
    },
    async *connect(req, ctx) {
      const { t, rec } = await guard(async () => {
        const t = await resolve(ctx);
        const rec = await selected(t, req.process);
        if (rec.state !== 'running') throw new SbxError('not_found', `process with pid ${pidOf(rec.id)} has ended`);
        return { t, rec };
      })();
      yield { event: { event: { case: 'start', value: { pid: pidOf(rec.id) } } } };
      for await (const event of events(svc(), t, rec, ctx)) yield { event };
    },
    list: guard(async (_req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const running = (await svc().list(t.rec.id, t.caller)).filter((p) => p.state === 'running');
      return {
        processes: running.map((p) => {
          const tag = tags.tagOf(p);
          return { pid: pidOf(p.id), config: configOf(p), ...(tag !== undefined ? { tag } : {}) };
        }),
      };
    }),
    sendInput: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const rec = await selected(t, req.process);
      const input = req.input?.input;
      if (input?.case === 'stdin' || input?.case === 'pty') await svc().writeStdin(t.rec.id, rec.id, input.value, t.caller);
      return {};
    }),
    streamInput: guard(async (reqs, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      let rec: ProcessRecord | null = null;
      for await (const r of reqs) {
        if (r.event.case === 'start') rec = await selected(t, r.event.value.process);
        else if (r.event.case === 'data') {
          if (!rec) throw new SbxError('bad_request', 'the first message of StreamInput must be its start');
          const input = r.event.value.input?.input;
          if (input?.case === 'stdin' || input?.case === 'pty') await svc().writeStdin(t.rec.id, rec.id, input.value, t.caller);
        }
      }
      return {};
    }),
    closeStdin: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const rec = await selected(t, req.process);
      await svc().closeStdin(t.rec.id, rec.id, t.caller);
      return {};
    }),
    sendSignal: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const rec = await selected(t, req.process);
      if (rec.state !== 'running') throw new SbxError('not_found', `process with pid ${pidOf(rec.id)} has ended`);
      if (req.signal === Signal.SIGKILL) await svc().kill(t.rec.id, rec.id, t.caller);
      else await svc().signal(t.rec.id, rec.id, signalOf(req.signal), t.caller);
      return {};
    }),
    update: guard(async (req, ctx: HandlerContext) => {
      const t = await resolve(ctx);
      const rec = await selected(t, req.process);
      const size = req.pty?.size;
      if (size) await svc().resize(t.rec.id, rec.id, size.cols, size.rows, t.caller);
      return {};
    }),
  };
}

async function startProcess(
  deps: EnvdDeps,
  processes: ProcessService,
  req: StartRequest,
  ctx: HandlerContext,
  resolve: Resolve,
): Promise<{ t: EnvdTarget; rec: ProcessRecord }> {
  const t = await resolve(ctx);
  const cfg = req.process;
  if (!cfg || cfg.cmd === '') throw new SbxError('bad_request', 'process.cmd is required');
  if (req.tag !== undefined) ProcessTags.check(req.tag);
  const account = await accountOf(deps, t, userOf(ctx.requestHeader.get('authorization')));
  // The sandbox's env (E2B's create `envVars`) under every command, then the user's, then the call's.
  const env: Record<string, string> = { ...t.rec.env };
  if (account) Object.assign(env, { HOME: account.home, USER: account.name, LOGNAME: account.name });
  Object.assign(env, cfg.envs);
  const timeout = ctx.timeoutMs();
  const pty = req.pty?.size ? { cols: req.pty.size.cols, rows: req.pty.size.rows } : undefined;
  const rec = await processes.start(
    t.rec.id,
    {
      command: cfg.cmd,
      args: cfg.args,
      mode: 'argv',
      env,
      ...(cfg.cwd !== undefined && cfg.cwd !== '' ? { workdir: cfg.cwd } : account ? { workdir: account.home } : {}),
      ...(timeout !== undefined ? { timeout: `${Math.max(1, Math.ceil(timeout))}ms` } : {}),
    },
    t.caller,
    {
      attach: true,
      stdin: req.stdin === true,
      ...(pty ? { pty } : {}),
      ...(account ? { user: { uid: account.uid, gid: account.gid } } : {}),
    },
  );
  return { t, rec };
}

/** The process's output from its first byte, then its end, with keepalives while it is quiet. */
async function* events(processes: ProcessService, t: EnvdTarget, rec: ProcessRecord, ctx: HandlerContext): AsyncGenerator<Out> {
  let items: AsyncIterable<ProcessOutputItem | Keepalive>;
  try {
    items = await processes.output(t.rec.id, rec.id, t.caller, { offset: 0, follow: true });
  } catch (err) {
    throw toConnectError(err);
  }
  const ms = keepaliveMs(ctx.requestHeader.get('keepalive-ping-interval'));
  const pty = processes.hasTerminal(rec.id);
  for await (const item of withKeepalive(items, ms, () => KEEPALIVE, ctx.signal)) {
    if (item.stream === 'keepalive') yield { event: { case: 'keepalive', value: {} } };
    else if (item.stream === 'stdout' || item.stream === 'stderr') {
      yield { event: { case: 'data', value: { output: { case: pty ? 'pty' : item.stream, value: item.data } } } };
    } else if (item.stream === 'exit') {
      yield { event: { case: 'end', value: endOf(item) } };
      return;
    }
  }
}

type Out = MessageInitShape<typeof ProcessEventSchema>;
type Keepalive = { stream: 'keepalive' };
const KEEPALIVE: Keepalive = { stream: 'keepalive' };

/** E2B's end event: the exit code (-1 without one), whether it exited by itself, and how it ended. */
function endOf(item: Extract<ProcessOutputItem, { stream: 'exit' }>): MessageInitShape<typeof ProcessEvent_EndEventSchema> {
  const code = item.exit_code;
  const exited = item.state === 'exited' && code !== null;
  const status = exited ? `exit status ${code}` : item.state === 'timeout' ? 'timeout' : 'signal: killed';
  return { exitCode: code ?? -1, exited, status, ...(item.state === 'timeout' ? { error: 'the command reached its timeout' } : {}) };
}

async function select(
  processes: ProcessService,
  tags: ProcessTags,
  t: EnvdTarget,
  sel: ProcessSelector | undefined,
): Promise<ProcessRecord> {
  const s = sel?.selector;
  if (s?.case === 'pid') return processByPid(processes, t, s.value);
  if (s?.case === 'tag') return tags.find(processes, t, s.value);
  throw new SbxError('bad_request', 'process.pid or process.tag is required');
}

function signalOf(s: Signal): ExecSignal {
  const name = `SIG${Signal[s]?.replace(/^SIG/, '') ?? ''}`;
  if ((EXEC_SIGNALS as readonly string[]).includes(name)) return name as ExecSignal;
  throw new SbxError('bad_request', `signal ${s} is not supported`);
}

/** How E2B lists a process: its program and arguments (env is never shown: it may carry secrets). */
function configOf(p: ProcessRecord): { cmd: string; args: string[]; envs: Record<string, string> } {
  if (p.mode === 'argv') return { cmd: p.command, args: p.args, envs: {} };
  return { cmd: '/bin/sh', args: ['-c', [p.command, ...p.args].join(' ')], envs: {} };
}
