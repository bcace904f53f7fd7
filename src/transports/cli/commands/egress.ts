import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

/** `sbx egress ID --allow … --deny …` (DESIGN.md §10): replaces the lists of a filtered sandbox. */
export const egressCommand: CommandSpec = {
  name: 'egress',
  summary: 'replace the egress rules of a filtered sandbox (open connections they forbid are closed)',
  args: [{ name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true }],
  options: [
    {
      flags: '--allow <rule>',
      description: 'allow rule: host, *.name, IP or CIDR, optional :port (repeatable; none given: nothing is allowed)',
      kind: 'list',
    },
    { flags: '--deny <rule>', description: 'deny rule, checked before the allow rules (repeatable)', kind: 'list' },
  ],
  examples: [
    'sbx egress sb-1a2b3c --allow pypi.org --allow files.pythonhosted.org',
    "sbx egress sb-1a2b3c --allow '*.example.com:443' --deny internal.example.com",
  ],
  async run(ctx, opts: { id: string; allow?: string[]; deny?: string[] }) {
    const lists = { allow: opts.allow ?? [], deny: opts.deny ?? [] };
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.updateEgress(id, lists, { signal: ctx.signal }));
    if (ctx.out.json) ctx.out.printJson(s);
    else {
      const shown = s.egress ?? lists;
      ctx.out.line(
        `${s.id} egress: allow ${shown.allow.length ? shown.allow.join(', ') : '(nothing)'}; deny ` +
          `${shown.deny.length ? shown.deny.join(', ') : '(nothing)'}`,
      );
    }
    return 0;
  },
};
