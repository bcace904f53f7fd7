import { printSandbox } from '../shared/render.js';
import type { CommandSpec } from '../spec.js';

export const getCommand: CommandSpec = {
  name: 'get',
  summary: 'show one sandbox',
  args: [{ name: 'id', description: 'sandbox id', required: true }],
  async run(ctx, opts: { id: string }) {
    const s = await ctx.client.get(opts.id, { signal: ctx.signal });
    if (ctx.out.json) ctx.out.printJson(s);
    else printSandbox(ctx.out, s);
    return 0;
  },
};
