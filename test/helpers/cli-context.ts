/**
 * A fake CLI context for running command handlers in process (issue 18 item 6): output captured in
 * strings, a real typed client pointed at a test server, no argv parsing, no child process.
 */
import { Readable } from 'node:stream';
import { Client } from '../../src/client/client.js';
import type { CliContext } from '../../src/transports/cli/context.js';
import { Output, type Sink } from '../../src/transports/cli/output/output.js';

export interface FakeCli {
  ctx: CliContext;
  stdout(): string;
  stderr(): string;
  close(): Promise<void>;
}

function sink(buf: { text: string }): Sink {
  return {
    write(chunk: string | Uint8Array, cb?: (err?: Error | null) => void) {
      buf.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
      cb?.();
      return true;
    },
  };
}

export function fakeCli(opts: {
  url: string;
  json?: boolean;
  apiKey?: string;
  adminKey?: string;
  user?: string;
  stdin?: string;
  home?: string;
}): FakeCli {
  const out = { text: '' };
  const err = { text: '' };
  const client = new Client({ url: opts.url, apiKey: opts.apiKey, adminKey: opts.adminKey, userId: opts.user });
  const ac = new AbortController();
  const ctx: CliContext = {
    out: new Output({ stdout: sink(out), stderr: sink(err), json: Boolean(opts.json), color: false }),
    client,
    config: { url: opts.url, urlSource: '--url', apiKey: opts.apiKey, adminKey: opts.adminKey, user: opts.user, json: Boolean(opts.json) },
    env: {},
    cwd: opts.home ?? '/',
    home: opts.home ?? '/',
    stdin: { stream: Readable.from([Buffer.from(opts.stdin ?? '')]), isTTY: false },
    signal: ac.signal,
  };
  return {
    ctx,
    stdout: () => out.text,
    stderr: () => err.text,
    async close() {
      ac.abort();
      await client.close();
    },
  };
}
