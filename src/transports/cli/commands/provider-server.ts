/**
 * `sbx provider-server`: the reference backend of the custom HTTP provider contract
 * (docs/providers/custom-http.md), answered by a real local provider. The server stack loads only
 * when the command runs.
 */
import { readFileSync } from 'node:fs';
import { ExitError, UsageError } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { CommandSpec } from '../spec.js';

const PROVIDERS = ['mock', 'proot', 'docker'] as const;

/** `host:port`, `[v6]:port` or `:port` (loopback). */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text.trim());
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) throw new UsageError(`--listen must be host:port, got ${JSON.stringify(text)}`);
  return { host: m[1] ?? (m[2] || '127.0.0.1'), port };
}

function readKey(file: string): string {
  let key: string;
  try {
    key = readFileSync(file, 'utf8').trim();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ExitError(
      EXIT.config,
      `the API key file ${file} ${code === 'ENOENT' ? 'does not exist' : `cannot be read (${code ?? 'error'})`}`,
    );
  }
  if (key === '') throw new ExitError(EXIT.config, `the API key file ${file} is empty`);
  return key;
}

export const providerServerCommand: CommandSpec = {
  name: 'provider-server',
  summary: 'serve the custom HTTP provider contract from a local provider',
  offline: true,
  stopsOnSignal: true,
  options: [
    { flags: '--provider <name>', description: 'the local provider behind it', choices: PROVIDERS, default: 'mock' },
    { flags: '--listen <host:port>', description: 'listen address', default: '127.0.0.1:7424' },
    {
      flags: '--api-key-file <file>',
      description: 'file holding the key every request must send in X-API-Key (required)',
      complete: 'file',
    },
    { flags: '--rootfs <dir>', description: "proot's root filesystem (else providers.proot.rootfs)", complete: 'file' },
    { flags: '-c, --config <file>', description: 'config file for the provider settings (env SBX_CONFIG)', complete: 'file' },
    {
      flags: '--anchor',
      description: "answer exactly as the anchor's contract documents (no exit lines, no sbx additions), to test a client against it",
    },
  ],
  examples: [
    'sbx provider-server --provider mock --api-key-file key.txt',
    'sbx provider-server --provider proot --rootfs ./rootfs --listen 0.0.0.0:7424 --api-key-file key.txt',
  ],
  async run(
    ctx,
    opts: { provider: (typeof PROVIDERS)[number]; listen: string; apiKeyFile?: string; rootfs?: string; config?: string; anchor?: boolean },
  ) {
    if (!opts.apiKeyFile) throw new UsageError('--api-key-file is required: the server refuses every request without the key');
    const { host, port } = parseListen(opts.listen);
    const apiKey = readKey(opts.apiKeyFile);
    const { startProviderServer } = await import('../../../compose/provider-server.js');
    const started = await startProviderServer({
      provider: opts.provider,
      host,
      port,
      apiKey,
      config: opts.config,
      rootfs: opts.rootfs,
      anchor: opts.anchor === true,
      env: ctx.env,
      cwd: ctx.cwd,
      home: ctx.home,
    });
    if (!started.ok) throw new ExitError(started.stage === 'config' ? EXIT.config : EXIT.failure, started.message);
    ctx.out.streams.stderr.write(`sbx provider-server: ${opts.provider} on ${started.url}\n`);
    await new Promise<void>((resolve) => {
      if (ctx.signal.aborted) return resolve();
      ctx.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    await started.close();
    return 0;
  },
};
