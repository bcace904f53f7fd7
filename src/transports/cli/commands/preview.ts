import { ExitError, UsageError } from '../errors.js';
import { withSandboxId } from '../shared/sandbox-id.js';
import type { CommandSpec } from '../spec.js';

/**
 * `sbx preview ID PORT`: the URL at which TCP PORT inside the sandbox is reached (DESIGN.md §9),
 * on the server's own scheme and port. With `server.preview_auth` the URL carries the sandbox's
 * token once (`?sbx_token=`); the proxy trades it for a cookie and drops it from the address.
 */
export const previewCommand: CommandSpec = {
  name: 'preview',
  summary: 'print the live preview URL of a port inside a sandbox',
  args: [
    { name: 'id', description: 'sandbox id (or a unique prefix of it)', required: true },
    { name: 'port', description: 'TCP port inside the sandbox (1-65535)', required: true },
  ],
  options: [{ flags: '--open', description: 'open the URL in the default browser as well' }],
  examples: ['sbx preview sb-1a2b3c 8080', 'curl "$(sbx preview sb-1a2b3c 8080)"'],
  async run(ctx, opts: { id: string; port: string; open?: boolean }) {
    const port = /^\d{1,5}$/.test(opts.port) ? Number(opts.port) : NaN;
    if (!(port >= 1 && port <= 65535)) throw new UsageError(`port must be a number from 1 to 65535, got ${JSON.stringify(opts.port)}`);
    const { value: s } = await withSandboxId(ctx, opts.id, (id) => ctx.client.get(id, { signal: ctx.signal }));
    if (!s.preview_domain) {
      throw new ExitError(
        1,
        `previews are off on this server: it has no preview domain (set server.preview_domain, e.g. preview.localhost)`,
      );
    }
    const api = new URL(ctx.config.url);
    const url = new URL(`${api.protocol}//${port}-${s.id}.${s.preview_domain}/`);
    if (api.port) url.port = api.port;
    if (s.preview_token) url.searchParams.set('sbx_token', s.preview_token);
    const text = url.toString();
    if (ctx.out.json) ctx.out.printJson({ url: text, sandbox_id: s.id, port });
    else ctx.out.line(text);
    if (opts.open) await openInBrowser(text).catch((err: Error) => ctx.out.warn(`could not open a browser: ${err.message}`));
    return 0;
  },
};

/** `xdg-open` (or `open` on macOS), detached: the CLI does not wait for the browser. */
async function openInBrowser(url: string): Promise<void> {
  const { spawn } = await import('node:child_process');
  const opener = process.platform === 'darwin' ? 'open' : 'xdg-open';
  await new Promise<void>((resolve, reject) => {
    const child = spawn(opener, [url], { stdio: 'ignore', detached: true });
    child.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code === 'ENOENT' ? `${opener} is not installed` : err.message)),
    );
    child.once('spawn', () => {
      child.unref();
      resolve();
    });
  });
}
