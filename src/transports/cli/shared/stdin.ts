import type { StdinSource } from '../context.js';

/** Reads piped stdin to the end; undefined when stdin is a terminal or empty. */
export async function readPipedStdin(stdin: StdinSource): Promise<Uint8Array | undefined> {
  if (stdin.isTTY) return undefined;
  const parts: Buffer[] = [];
  for await (const chunk of stdin.stream) parts.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array));
  const all = Buffer.concat(parts);
  return all.byteLength > 0 ? all : undefined;
}
