/** `sbx pause ID` and `sbx resume ID` (DESIGN.md §16). */
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

const ID = { name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true } as const;

export const pauseCommand: CommandSpec = {
  name: 'pause',
  summary: 'pause a sandbox: every process frozen, memory kept; an exec, file or process call resumes it',
  args: [ID],
  examples: ['sbx pause sb-1a2b3c', 'sbx spawn --auto-pause 10m'],
  async run(ctx, opts: { id: string }) {
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.pause(id, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.line(`${s.id} ${s.state}`);
    return 0;
  },
};

export const resumeCommand: CommandSpec = {
  name: 'resume',
  summary: 'resume a paused sandbox',
  args: [ID],
  examples: ['sbx resume sb-1a2b3c'],
  async run(ctx, opts: { id: string }) {
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.resume(id, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.line(`${s.id} ${s.state}`);
    return 0;
  },
};
