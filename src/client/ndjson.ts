import { SbxError } from '../core/errors.js';

/** Splits a byte stream into parsed NDJSON values; a bad line is an `internal` error. */
export async function* parseNdjson<T>(body: AsyncIterable<Uint8Array | string>): AsyncGenerator<T> {
  const decoder = new TextDecoder();
  let pending = '';
  for await (const chunk of body) {
    pending += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl).trim();
      pending = pending.slice(nl + 1);
      if (line !== '') yield parseLine<T>(line);
    }
  }
  pending += decoder.decode();
  if (pending.trim() !== '') yield parseLine<T>(pending.trim());
}

function parseLine<T>(line: string): T {
  try {
    return JSON.parse(line) as T;
  } catch {
    throw new SbxError('internal', `malformed stream line from server: ${line.slice(0, 80)}`);
  }
}
