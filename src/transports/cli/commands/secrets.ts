import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Secret } from '../../../client/types.js';
import { SbxError } from '../../../contracts/errors.js';
import { UsageError } from '../errors.js';
import { relativeTime } from '../output/format.js';
import type { Column } from '../output/table.js';
import { readPipedStdin } from '../shared/stdin.js';
import type { CommandSpec, OptionSpec } from '../spec.js';

const NAME = { name: 'name', description: 'secret name: [A-Z_][A-Z0-9_]{0,63} (the variable inside sandboxes)', required: true } as const;
const OWNER: OptionSpec = { flags: '--owner <id>', description: "admins: another owner's secrets (?owner_id=)" };

type Ctx = Parameters<NonNullable<CommandSpec['run']>>[0];

function columns(withOwner: boolean): Column<Secret>[] {
  return [
    ...(withOwner ? [{ header: 'OWNER', value: (s: Secret) => s.owner_id ?? '-' }] : []),
    { header: 'NAME', value: (s) => s.name },
    { header: 'HOSTS', value: (s) => s.hosts.join(',') },
    { header: 'PLAIN HTTP', value: (s) => (s.allow_plain_http ? 'yes' : 'no') },
    { header: 'FINGERPRINT', value: (s) => s.fingerprint },
    { header: 'UPDATED', value: (s) => relativeTime(s.updated_at) },
  ];
}

/** The value from --value-file or piped stdin (never from a terminal or an argument); one trailing newline dropped. */
async function readValue(ctx: Ctx, file: string | undefined): Promise<string> {
  let data: Uint8Array | undefined;
  if (file !== undefined) {
    try {
      data = await readFile(resolve(ctx.cwd, file));
    } catch (err) {
      throw new UsageError(`--value-file ${file}: ${(err as NodeJS.ErrnoException).code ?? 'cannot read it'}`);
    }
  } else {
    if (ctx.stdin.isTTY)
      throw new UsageError('the value comes from --value-file FILE or from stdin (pipe it in: printf %s "$TOKEN" | sbx secrets set …)');
    data = await readPipedStdin(ctx.stdin);
  }
  const text = Buffer.from(data ?? new Uint8Array())
    .toString('utf8')
    .replace(/\r?\n$/, '');
  if (text === '') throw new UsageError('the value is empty');
  return text;
}

async function list(ctx: Ctx, opts: { owner?: string } = {}): Promise<number> {
  const items = await ctx.client.secrets.list({ signal: ctx.signal, ...(opts.owner !== undefined ? { owner_id: opts.owner } : {}) });
  if (ctx.out.json) ctx.out.printJson(items);
  else if (items.length === 0) ctx.out.note('no secrets (make one with sbx secrets set NAME --host HOST < value-file)');
  else ctx.out.table(columns(items.some((s) => s.owner_id !== items[0]!.owner_id)), items);
  return 0;
}

const ls: CommandSpec = {
  name: 'ls',
  aliases: ['list'],
  summary: 'list secrets, never their values (the default)',
  options: [OWNER],
  run: list,
};

const set: CommandSpec = {
  name: 'set',
  summary: 'create a secret, or give an existing one a new value (and hosts, when --host is given)',
  description:
    'The value is read from --value-file or stdin, never from the command line; it is stored encrypted and never shown again. ' +
    'Sandboxes spawned with --secret NAME (network filtered) see a placeholder in $NAME; the egress gateway puts the value ' +
    'into requests to the hosts named here.',
  args: [NAME],
  options: [
    {
      flags: '--host <rule>',
      description: 'host the value may be sent to: name, *.name, IP or CIDR, optional :port (repeatable)',
      kind: 'list',
    },
    { flags: '--value-file <file>', description: 'read the value from this file (default: stdin)', complete: 'file' },
    {
      flags: '--allow-plain-http',
      description: 'also inject into plain-HTTP requests (the value then crosses the wire in clear)',
      kind: 'boolean',
    },
    OWNER,
  ],
  examples: [
    'printf %s "$OPENAI_API_KEY" | sbx secrets set OPENAI_API_KEY --host api.openai.com',
    'sbx secrets set GH_TOKEN --host api.github.com --value-file ~/.config/gh-token',
    'sbx spawn --network filtered --allow api.openai.com --secret OPENAI_API_KEY',
  ],
  async run(ctx, opts: { name: string; host?: string[]; valueFile?: string; allowPlainHttp?: boolean; owner?: string }) {
    const value = await readValue(ctx, opts.valueFile);
    const scope = { signal: ctx.signal, ...(opts.owner !== undefined ? { owner_id: opts.owner } : {}) };
    let s: Secret | null = null;
    let verb = 'created';
    if (opts.host?.length) {
      const body = { name: opts.name, value, hosts: opts.host, ...(opts.allowPlainHttp ? { allow_plain_http: true } : {}) };
      s = await ctx.client.secrets.create(body, scope).catch((err: unknown) => {
        // It exists: this set gives it the new value (and these hosts).
        if (err instanceof SbxError && err.code === 'conflict') return null;
        throw err;
      });
    }
    if (!s) {
      verb = 'updated';
      const body = {
        value,
        ...(opts.host?.length ? { hosts: opts.host } : {}),
        ...(opts.allowPlainHttp ? { allow_plain_http: true } : {}),
      };
      s = await ctx.client.secrets.update(opts.name, body, scope).catch((err: unknown) => {
        if (err instanceof SbxError && err.code === 'not_found' && !opts.host?.length)
          throw new UsageError(`secret ${opts.name} does not exist: creating it needs at least one --host`);
        throw err;
      });
    }
    if (ctx.out.json) ctx.out.printJson(s);
    else ctx.out.line(`${verb} secret ${s.name} (fingerprint ${s.fingerprint}; hosts ${s.hosts.join(', ')})`);
    return 0;
  },
};

const rm: CommandSpec = {
  name: 'rm',
  aliases: ['delete'],
  summary: 'delete a secret: sandboxes bound to it stop getting its value',
  args: [NAME],
  options: [OWNER],
  async run(ctx, opts: { name: string; owner?: string }) {
    const r = await ctx.client.secrets.remove(opts.name, {
      signal: ctx.signal,
      ...(opts.owner !== undefined ? { owner_id: opts.owner } : {}),
    });
    if (ctx.out.json) ctx.out.printJson(r);
    else ctx.out.line(`deleted secret ${opts.name}`);
    return 0;
  },
};

/** `sbx secrets` (DESIGN.md §15): ls (default), set, rm. */
export const secretsCommand: CommandSpec = {
  name: 'secrets',
  aliases: ['secret'],
  summary: 'secrets sandboxes use without seeing them: ls (default), set, rm',
  examples: [
    'printf %s "$TOKEN" | sbx secrets set API_TOKEN --host api.example.com',
    'sbx spawn --network filtered --allow api.example.com --secret API_TOKEN',
    'sbx secrets',
    'sbx secrets rm API_TOKEN',
  ],
  subcommands: [ls, set, rm],
  run: (ctx) => list(ctx),
};
