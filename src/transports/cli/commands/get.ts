import { printSandbox } from '../shared/render.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

export const getCommand: CommandSpec = {
  name: 'get',
  summary: 'show one sandbox',
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  async run(ctx, opts: { id: string }) {
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.get(id, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(s);
    else printSandbox(ctx.out, s);
    return 0;
  },
};
