/**
 * The tools of `sbx mcp` (DESIGN.md §2; the server is in server.ts): one table, one entry a tool —
 * its name, what the agent is told, its argument schema and what it does through the typed client.
 * A new tool is one more entry; server.ts registers every entry the same way (errors → tool errors).
 */
import { z } from 'zod';
import type { ExecInput } from '../../client/types.js';
import { OUTPUT_LIMIT, OutputCapture } from './capture.js';
import {
  checkSize,
  decodeBase64,
  duration,
  type Json,
  READ_LIMIT,
  renderExec,
  sandboxId,
  stringMap,
  textOrBase64,
  toDuration,
  ToolError,
} from './values.js';

import { PROCESS_TOOLS } from './process-tools.js';
import { defineTool, type ToolDef } from './tool-def.js';

export type { ToolContext, ToolDef, ToolMeta } from './tool-def.js';

export const TOOLS: readonly ToolDef[] = [
  defineTool(
    'spawn',
    {
      title: 'Spawn a sandbox',
      description:
        'Create a new disposable sandbox and return it (its id is what the other tools take). Everything is ' +
        'optional: the server defaults apply. ' +
        "With template, the sandbox takes the template's image and size (only ttl, provider and metadata may be given beside it).",
    },
    {
      image: z.string().min(1).optional().describe('container image, e.g. python:3.12-slim'),
      provider: z.string().min(1).optional().describe('provider name (docker, proot, mock, …); see the server for which exist'),
      ttl: duration.optional().describe('lifetime before it is destroyed, e.g. "30m" (server default otherwise)'),
      memory_mb: z.number().int().positive().optional().describe('memory limit in MiB'),
      vcpus: z.number().int().positive().optional().describe('virtual CPUs'),
      template: z.string().min(1).optional().describe('spawn from this template (see the templates tool)'),
      metadata: stringMap.optional().describe('string labels kept with the sandbox'),
    },
    async (a, signal, { client, ok }) => {
      if (a.template !== undefined) {
        const extra = (['image', 'memory_mb', 'vcpus'] as const).filter((k) => a[k] !== undefined);
        if (extra.length > 0) throw new ToolError('bad_request', `with template, leave out ${extra.join(', ')}: the template sets them`);
        const s = await client.templates.spawn(
          a.template,
          { ttl: toDuration(a.ttl), provider: a.provider, metadata: a.metadata },
          { signal },
        );
        return ok(s as unknown as Json);
      }
      const s = await client.spawn(
        { image: a.image, provider: a.provider, ttl: toDuration(a.ttl), memory_mb: a.memory_mb, vcpus: a.vcpus, metadata: a.metadata },
        { signal },
      );
      return ok(s as unknown as Json);
    },
  ),
  defineTool(
    'list_sandboxes',
    {
      title: 'List sandboxes',
      description: 'The live sandboxes this key can see, oldest first (at most limit, default 100).',
      readOnly: true,
    },
    { limit: z.number().int().min(1).max(1000).optional().describe('at most this many (1-1000, default 100)') },
    async (a, signal, { client, ok }) => {
      const page = await client.listPage({ limit: a.limit ?? 100, signal });
      const sandboxes = page.items.map((s) => ({
        id: s.id,
        state: s.state,
        image: s.image,
        provider: s.provider,
        created_at: s.created_at,
        expires_at: s.expires_at,
        metadata: s.metadata,
      }));
      return ok({ sandboxes, more: page.next !== null });
    },
  ),
  defineTool(
    'exec',
    {
      title: 'Run a command',
      description:
        'Run a command in a sandbox and wait for it. command is a shell command line (run with sh -c: pipes, ' +
        '&&, redirections work) unless args is given, ' +
        'then command is the program and args its arguments, without a shell. Returns exit_code, stdout and ' +
        'stderr; a non-zero exit code is a normal result. ' +
        `Each stream keeps its first ${OUTPUT_LIMIT / 4 / 1024} KiB and last ${(OUTPUT_LIMIT * 3) / 4 / 1024} ` +
        `KiB; a note says how much was dropped. ` +
        'On timeout the command is killed and exit_code is 124. A cancelled call kills the command too: for anything longer than ' +
        'about a minute (MCP clients often give up after 60 s), use start_process and process_output.',
    },
    {
      sandbox_id: sandboxId,
      command: z.string().min(1).describe('shell command line, or the program when args is given'),
      args: z.array(z.string()).optional().describe('arguments: run command directly with these (no shell)'),
      workdir: z.string().min(1).optional().describe('working directory inside the sandbox'),
      env: stringMap.optional().describe('extra environment variables'),
      timeout: duration.optional().describe('kill the command after this long, e.g. "30s" (server default otherwise)'),
      stdin: z.string().optional().describe('text given to the command on its standard input'),
    },
    async (a, signal, { client, ok }) => {
      const input: ExecInput = { command: a.command, args: a.args ?? [], mode: a.args === undefined ? 'shell' : 'argv', binary: true };
      if (a.workdir !== undefined) input.workdir = a.workdir;
      if (a.env !== undefined) input.env = a.env;
      if (a.timeout !== undefined) input.timeout = toDuration(a.timeout);
      if (a.stdin !== undefined) input.stdin = a.stdin;
      const out = new OutputCapture();
      const err = new OutputCapture();
      let exit: { exit_code?: number; duration?: string; timed_out?: boolean; error?: { code?: string; message?: string } } | undefined;
      for await (const c of client.execStream(a.sandbox_id, input, { signal })) {
        if (c.stream === 'exit') exit = c as typeof exit;
        else (c.stream === 'stdout' ? out : err).push(Buffer.from(c.data, c.encoding === 'base64' ? 'base64' : 'utf8'));
      }
      if (exit?.error)
        throw new ToolError(exit.error.code ?? 'internal', `exec failed while the command ran: ${exit.error.message ?? 'unknown error'}`);
      if (!exit) throw new ToolError('unavailable', 'the exec stream ended without an exit status');
      const timedOut = Boolean(exit.timed_out);
      const notes = [out.note('stdout'), err.note('stderr')].filter((n): n is string => n !== undefined);
      if (timedOut) notes.unshift(`the command hit its timeout and was killed`);
      const result: Json = {
        exit_code: exit.exit_code ?? -1,
        stdout: out.text('stdout'),
        stderr: err.text('stderr'),
        duration: exit.duration,
        timed_out: timedOut,
        stdout_bytes: out.total,
        stderr_bytes: err.total,
        stdout_dropped_bytes: out.dropped,
        stderr_dropped_bytes: err.dropped,
      };
      if (notes.length > 0) result.notes = notes;
      return ok(result, renderExec(result, notes));
    },
  ),
  defineTool(
    'read_file',
    {
      title: 'Read a file',
      description:
        `Read a file from a sandbox. Returns its content as text when it is valid UTF-8 (encoding ` +
        `"utf8"), else base64 (encoding "base64"). At most ${READ_LIMIT / 1024 / 1024} MiB.`,
      readOnly: true,
    },
    { sandbox_id: sandboxId, path: z.string().min(1).describe('absolute path inside the sandbox, e.g. /workspace/main.py') },
    async (a, signal, { client, ok }) => {
      const bytes = await client.files.read(a.sandbox_id, a.path, { signal });
      checkSize(bytes, a.path);
      return ok({ path: a.path, size: bytes.byteLength, ...textOrBase64(bytes) });
    },
  ),
  defineTool(
    'write_file',
    {
      title: 'Write a file',
      description:
        'Create or replace a file in a sandbox (parent directories are created). content is text, or base64 ' +
        'with encoding "base64" for binary data.',
    },
    {
      sandbox_id: sandboxId,
      path: z.string().min(1).describe('absolute path inside the sandbox'),
      content: z.string().describe('the file content (text, or base64 when encoding is "base64")'),
      encoding: z.enum(['utf8', 'base64']).optional().describe('how content is given (default utf8)'),
      mode: z
        .string()
        .regex(/^0?[0-7]{3,4}$/, 'an octal mode such as 0644 or 0755')
        .optional()
        .describe('permission bits in octal, e.g. "0755"'),
    },
    async (a, signal, { client, ok }) => {
      const data = a.encoding === 'base64' ? new Uint8Array(decodeBase64(a.content)) : a.content;
      await client.files.write(a.sandbox_id, a.path, data, { mode: a.mode, signal });
      const size = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
      return ok({ status: 'written', path: a.path, size });
    },
  ),
  defineTool(
    'fork',
    {
      title: 'Fork a sandbox',
      description:
        "Copy a sandbox's filesystem at this moment into 1 to 10 new sandboxes (same image, size, network, egress rules and secrets; " +
        'running processes are not carried). Returns the new sandboxes; each is independent of the parent afterwards.',
    },
    {
      sandbox_id: sandboxId,
      count: z.number().int().min(1).max(10).optional().describe('how many copies (1-10, default 1)'),
      ttl: duration.optional().describe('lifetime of each copy, e.g. "30m" (server default otherwise)'),
      metadata: stringMap.optional().describe("labels of the copies (the parent's otherwise)"),
    },
    async (a, signal, { client, ok }) => {
      const forks = await client.fork(a.sandbox_id, { count: a.count, ttl: toDuration(a.ttl), metadata: a.metadata }, { signal });
      return ok({ sandboxes: forks as unknown as Json });
    },
  ),
  defineTool(
    'pause',
    {
      title: 'Pause a sandbox',
      description:
        'Freeze every process of a sandbox, keeping its memory and files (state "paused"). The next exec, file call or process call ' +
        'resumes it by itself; a pause while a command runs is refused.',
    },
    { sandbox_id: sandboxId },
    async (a, signal, { client, ok }) => ok((await client.pause(a.sandbox_id, { signal })) as unknown as Json),
  ),
  defineTool(
    'resume',
    {
      title: 'Resume a sandbox',
      description: 'Thaw a paused sandbox (state "running" again); a running one answers as it is.',
    },
    { sandbox_id: sandboxId },
    async (a, signal, { client, ok }) => ok((await client.resume(a.sandbox_id, { signal })) as unknown as Json),
  ),
  defineTool(
    'secrets_list',
    {
      title: 'List secrets',
      description:
        'The names of the secrets a spawn can bind (with network "filtered"), the hosts each may be sent to, and a fingerprint. ' +
        'Values are never shown: inside a sandbox the variable holds a placeholder that the egress gateway replaces on the way out.',
      readOnly: true,
    },
    {},
    async (_a, signal, { client, ok }) => {
      const secrets = await client.secrets.list({ signal });
      return ok({ secrets: secrets.map((x) => ({ name: x.name, hosts: x.hosts, fingerprint: x.fingerprint, updated_at: x.updated_at })) });
    },
  ),
  defineTool(
    'list_files',
    {
      title: 'List files',
      description: 'List a directory in a sandbox: name, path, size, mode, whether it is a directory.',
      readOnly: true,
    },
    { sandbox_id: sandboxId, path: z.string().min(1).optional().describe('absolute directory path (default /)') },
    async (a, signal, { client, ok }) =>
      ok({ path: a.path ?? '/', files: await client.files.list(a.sandbox_id, a.path ?? '/', { signal }) }),
  ),
  defineTool(
    'destroy',
    {
      title: 'Destroy a sandbox',
      description: 'Destroy a sandbox and everything in it (idempotent for one already destroyed).',
      destructive: true,
    },
    { sandbox_id: sandboxId },
    async (a, signal, { client, ok }) => ok({ sandbox_id: a.sandbox_id, ...(await client.destroy(a.sandbox_id, { signal })) }),
  ),
  defineTool(
    'logs',
    {
      title: 'Console log',
      description: "A sandbox's console log: its last lines (lifecycle notes and the commands run in it).",
      readOnly: true,
    },
    { sandbox_id: sandboxId, lines: z.number().int().min(1).max(10_000).optional().describe('how many of the last lines (default 100)') },
    async (a, signal, { client, ok }) =>
      ok({ sandbox_id: a.sandbox_id, lines: await client.logs(a.sandbox_id, a.lines ?? 100, { signal }) }),
  ),
  defineTool(
    'templates',
    {
      title: 'List templates',
      description: 'The named sandbox templates (image, size, ttl, provider) that spawn accepts as template.',
      readOnly: true,
    },
    {},
    async (_a, signal, { client, ok }) => ok({ templates: await client.templates.list({ signal }) }),
  ),
  defineTool(
    'preview_url',
    {
      title: 'Preview URL',
      description:
        'The URL at which a TCP port inside a sandbox (e.g. a web server the agent started) is reached through ' +
        "the server's live-preview proxy.",
      readOnly: true,
    },
    { sandbox_id: sandboxId, port: z.number().int().min(1).max(65535).describe('TCP port inside the sandbox') },
    async (a, signal, { client, ok }) => {
      const s = await client.get(a.sandbox_id, { signal });
      if (!s.preview_domain) {
        throw new ToolError(
          'not_implemented',
          'previews are off on this server: it has no preview domain (the operator sets server.preview_domain, e.g. preview.localhost)',
        );
      }
      const api = new URL(client.url);
      const url = new URL(`${api.protocol}//${a.port}-${s.id}.${s.preview_domain}/`);
      if (api.port) url.port = api.port;
      if (s.preview_token) url.searchParams.set('sbx_token', s.preview_token);
      return ok({ url: url.toString(), sandbox_id: s.id, port: a.port });
    },
  ),
  ...PROCESS_TOOLS,
];
