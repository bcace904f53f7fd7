import type { ProcessOutputChunk } from '../../../client/processes.js';
import { SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import { messageFor } from '../errors.js';
import { resolveSandboxId } from './sandbox-id.js';

/** How often a follower that lost its connection tries again, and for how long at most. */
const RETRY_MS = 1000;
const RETRIES = 30;

/**
 * `sbx logs ID --process P [-f]`: the process's output, stdout and stderr to their own streams,
 * byte-exact. A broken follow connection is resumed from the last offset, so nothing is lost or
 * repeated. Following ends with the process's exit code.
 */
export async function printProcessOutput(ctx: CliContext, given: string, pid: string, follow: boolean): Promise<number> {
  const id = await resolveSandboxId(ctx, given);
  let offset = 0;
  let failures = 0;
  for (;;) {
    try {
      for await (const c of ctx.client.processes.output(id, pid, { offset, follow }, { signal: ctx.signal })) {
        const end = await emit(ctx, c);
        if (end !== undefined) return end;
        if (c.stream === 'stdout' || c.stream === 'stderr') offset = c.offset + bytesOf(c).byteLength;
        failures = 0;
      }
      if (!follow) return 0;
    } catch (err) {
      if (ctx.signal.aborted) throw err;
      if (!follow || !(err instanceof SbxError) || err.code !== 'unavailable' || ++failures > RETRIES) throw err;
      const why = messageFor(err, { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) });
      ctx.out.note(`output stream broke off (${why}); resuming at byte ${offset}`);
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  }
}

function bytesOf(c: ProcessOutputChunk): Buffer {
  return Buffer.from(c.data ?? '', c.encoding === 'base64' ? 'base64' : 'utf8');
}

/** Prints a chunk; returns the exit code to end with when it is the last one. */
async function emit(ctx: CliContext, c: ProcessOutputChunk): Promise<number | undefined> {
  if (ctx.out.json) {
    ctx.out.jsonLine(c);
  } else if (c.stream === 'stdout' || c.stream === 'stderr') {
    await ctx.out.raw(c.stream, bytesOf(c));
  } else if (c.stream === 'truncated') {
    ctx.out.note(`older output was dropped: continuing at byte ${c.offset}`);
  }
  if (c.stream !== 'exit') return undefined;
  if (!ctx.out.json && c.state !== 'exited') ctx.out.note(`process ${c.state}`);
  return typeof c.exit_code === 'number' ? c.exit_code : 137;
}
