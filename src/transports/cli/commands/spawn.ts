import { UsageError } from '../errors.js';
import { printSpawned } from '../shared/render.js';
import { OWNER_OPTION, pullHint, RESOURCE_OPTIONS, spawnRequest, templateImageFix, type ResourceFlags } from '../shared/spawn-flags.js';
import type { CommandSpec } from '../spec.js';

export const spawnCommand: CommandSpec = {
  name: 'spawn',
  summary: 'create a sandbox (prints its id when stdout is not a terminal)',
  options: [
    ...RESOURCE_OPTIONS,
    { flags: '--template <name>', description: 'spawn from a template (with --ttl, --provider, --meta, --owner overrides)' },
    OWNER_OPTION,
    {
      flags: '--idempotency-key <key>',
      description: 'retry-safe: the same key within 24 h answers the first sandbox instead of spawning again',
    },
  ],
  examples: [
    'ID=$(sbx spawn --ttl 10m)',
    'sbx spawn --image python:3.12 --memory 512 --meta team=ml',
    'sbx spawn --template py',
    'ID=$(sbx spawn --idempotency-key "job-$JOB_ID")',
    'sbx spawn --snapshot base --volume data:/data',
    'sbx spawn --auto-pause 10m --on-expire pause',
  ],
  async run(ctx, opts: ResourceFlags & { template?: string; idempotencyKey?: string }) {
    const req = spawnRequest(opts);
    const spawnOpts = { signal: ctx.signal, idempotencyKey: opts.idempotencyKey };
    let sandbox;
    if (opts.template !== undefined) {
      for (const [flag, set] of [
        ['--image', opts.image],
        ['--memory', opts.memory],
        ['--vcpus', opts.vcpus],
        ['--snapshot', opts.snapshot],
        ['--volume', opts.volume],
      ] as const) {
        if (set !== undefined) throw new UsageError(`${flag} cannot be combined with --template (edit the template instead)`);
      }
      const { image: _i, memory_mb: _m, vcpus: _v, snapshot: _s, volumes: _vol, ...overrides } = req;
      const template = opts.template;
      sandbox = await pullHint(
        ctx.out.spin(`spawning from template ${template}`, ctx.client.templates.spawn(template, overrides, spawnOpts)),
        templateImageFix(template),
      );
    } else {
      sandbox = await pullHint(
        ctx.out.spin('spawning sandbox', ctx.client.spawn(req, spawnOpts)),
        'spawn with --image NAME (an image the engine already has) or set defaults.image in the server config',
      );
    }
    printSpawned(ctx.out, sandbox);
    return 0;
  },
};
