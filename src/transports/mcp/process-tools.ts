/** The background-process tools of `sbx mcp` (the rest of the table is tools.ts). */
import { z } from 'zod';
import { OUTPUT_LIMIT } from './capture.js';
import { duration, type Json, sandboxId, stringMap, toDuration } from './values.js';
import { defineTool, type ToolDef } from './tool-def.js';

export const PROCESS_TOOLS: readonly ToolDef[] = [
  defineTool(
    'start_process',
    {
      title: 'Start a background process',
      description:
        'Start a long-running command (a server, a watcher) that goes on after this call; returns its process ' +
        'id. Read its output with process_output, end it with stop_process. ' +
        'command is a shell command line unless args is given.',
    },
    {
      sandbox_id: sandboxId,
      command: z.string().min(1).describe('shell command line, or the program when args is given'),
      args: z.array(z.string()).optional().describe('arguments: run command directly with these (no shell)'),
      workdir: z.string().min(1).optional(),
      env: stringMap.optional(),
      timeout: duration.optional().describe('kill it after this long (none by default)'),
    },
    async (a, signal, { client, ok }) => {
      const p = await client.processes.start(
        a.sandbox_id,
        {
          command: a.command,
          args: a.args ?? [],
          mode: a.args === undefined ? 'shell' : 'argv',
          workdir: a.workdir,
          env: a.env,
          timeout: toDuration(a.timeout),
        },
        { signal },
      );
      return ok(p as unknown as Json);
    },
  ),
  defineTool(
    'process_output',
    {
      title: 'Background process output',
      description:
        `Output of a background process (stdout and stderr interleaved as written) from byte offset (default ` +
        `0), at most ${OUTPUT_LIMIT / 1024} KiB per call; ` +
        'pass next_offset to the next call to continue. state tells whether it still runs; exit_code is set once it ended.',
      readOnly: true,
    },
    {
      sandbox_id: sandboxId,
      process_id: z.string().min(1).describe('process id from start_process (p-…)'),
      offset: z.number().int().min(0).optional().describe('byte offset to read from (default 0)'),
    },
    async (a, signal, { client, ok }) => {
      let offset = a.offset ?? 0;
      const parts: Buffer[] = [];
      let size = 0;
      let more = false;
      let dropped: number | undefined;
      const ac = new AbortController();
      const onAbort = () => ac.abort();
      signal.addEventListener('abort', onAbort, { once: true });
      try {
        for await (const c of client.processes.output(a.sandbox_id, a.process_id, { offset }, { signal: ac.signal })) {
          if (c.stream === 'truncated') {
            dropped = c.offset - offset;
            offset = c.offset;
          } else if (c.stream === 'stdout' || c.stream === 'stderr') {
            const bytes = Buffer.from(c.data ?? '', c.encoding === 'base64' ? 'base64' : 'utf8');
            const room = OUTPUT_LIMIT - size;
            const take = bytes.subarray(0, Math.max(0, room));
            parts.push(take);
            size += take.length;
            offset = c.offset + take.length;
            if (take.length < bytes.length) {
              more = true;
              break;
            }
          }
        }
      } finally {
        signal.removeEventListener('abort', onAbort);
        ac.abort();
      }
      const info = await client.processes.get(a.sandbox_id, a.process_id, { signal });
      const result: Json = {
        process_id: info.id,
        state: info.state,
        exit_code: info.exit_code,
        output: Buffer.concat(parts).toString('utf8'),
        next_offset: offset,
        more,
      };
      if (dropped !== undefined && dropped > 0) result.note = `${dropped} older bytes were dropped by the server before offset ${offset}`;
      return ok(result);
    },
  ),
  defineTool(
    'stop_process',
    {
      title: 'Stop a background process',
      description: 'Kill a background process (and its children); answers once it ended.',
      destructive: true,
    },
    { sandbox_id: sandboxId, process_id: z.string().min(1).describe('process id from start_process (p-…)') },
    async (a, signal, { client, ok }) => ok((await client.processes.kill(a.sandbox_id, a.process_id, { signal })) as unknown as Json),
  ),
];
