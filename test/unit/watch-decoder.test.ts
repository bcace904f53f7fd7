/**
 * The agent watch protocol's one decoder (adapters/providers/shared/watch-decoder.ts), used by the
 * docker agent's WATCH stream and the host-mode agent of mock and proot: payloads, refusals,
 * framing, and the stream's ready / stop / overflow / timeout rules. No process, no port.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  decodeWatchPayload,
  frameSplitter,
  WATCH_READY_TIMEOUT_MS,
  WatchStream,
  watchRefusal,
} from '../../src/adapters/providers/shared/watch-decoder.js';
import { SbxError } from '../../src/core/errors.js';
import type { WatchEvent } from '../../src/core/ports/index.js';

/** A payload as the agent writes it: kind, path NUL, old path NUL. */
const payload = (kind: number, path = '', old?: string) =>
  Buffer.concat([Buffer.from([kind]), Buffer.from(`${path}\0`), old === undefined ? Buffer.alloc(0) : Buffer.from(`${old}\0`)]);
const framed = (p: Buffer) => {
  const len = Buffer.alloc(4);
  len.writeUInt32LE(p.length);
  return Buffer.concat([len, p]);
};

async function collect(events: AsyncIterable<WatchEvent>): Promise<WatchEvent[]> {
  const out: WatchEvent[] = [];
  for await (const e of events) out.push(e);
  return out;
}

describe('decodeWatchPayload', () => {
  it('decodes each kind, a rename with its old path, ready and failed', () => {
    expect(decodeWatchPayload(payload(1, '/w/a'))).toEqual({ kind: 'event', event: { type: 'create', path: '/w/a' } });
    expect(decodeWatchPayload(payload(2, '/w/a'))).toEqual({ kind: 'event', event: { type: 'write', path: '/w/a' } });
    expect(decodeWatchPayload(payload(3, '/w/a'))).toEqual({ kind: 'event', event: { type: 'remove', path: '/w/a' } });
    expect(decodeWatchPayload(payload(4, '/w/y', '/w/x'))).toEqual({
      kind: 'event',
      event: { type: 'rename', path: '/w/y', old_path: '/w/x' },
    });
    expect(decodeWatchPayload(payload(5, '/w/a'))).toEqual({ kind: 'event', event: { type: 'chmod', path: '/w/a' } });
    expect(decodeWatchPayload(payload(6))).toEqual({ kind: 'event', event: { type: 'overflow' } });
    expect(decodeWatchPayload(Buffer.from([0]))).toEqual({ kind: 'ready' });
    expect(decodeWatchPayload(Buffer.from([255, 20, 0]))).toEqual({ kind: 'failed', errno: 20 });
    expect(decodeWatchPayload(Buffer.from('\x01/w/é\0'))).toEqual({ kind: 'event', event: { type: 'create', path: '/w/é' } });
  });

  it('drops what the sandbox could forge: relative paths, unknown kinds, unterminated or empty payloads', () => {
    expect(decodeWatchPayload(payload(1, 'etc/passwd'))).toBeNull();
    expect(decodeWatchPayload(payload(4, '/w/y', '../x'))).toBeNull();
    expect(decodeWatchPayload(payload(7, '/w/a'))).toBeNull();
    expect(decodeWatchPayload(Buffer.from('\x01/w/a'))).toBeNull();
    expect(decodeWatchPayload(Buffer.alloc(0))).toBeNull();
  });
});

describe('watchRefusal', () => {
  it('maps errnos to the file API’s answers', () => {
    expect(watchRefusal(2, '/x').code).toBe('not_found');
    expect(watchRefusal(20, '/x').code).toBe('bad_request');
    expect(watchRefusal(40, '/x').message).toContain('symbolic links are not followed');
    expect(watchRefusal(13, '/x').code).toBe('bad_request');
    expect(watchRefusal(36, '/x').message).toContain('too long');
    expect(watchRefusal(5, '/x')).toMatchObject({ code: 'provider_error', message: 'could not watch /x (errno 5)' });
  });
});

describe('frameSplitter', () => {
  it('reassembles frames split anywhere and several in one chunk', () => {
    const got: string[] = [];
    const feed = frameSplitter((p) => got.push(p.toString('hex')));
    const a = payload(1, '/a');
    const b = payload(4, '/b', '/c');
    const bytes = Buffer.concat([framed(a), framed(b), framed(Buffer.from([0]))]);
    for (let i = 0; i < bytes.length; i += 3) feed(bytes.subarray(i, i + 3));
    expect(got).toEqual([a.toString('hex'), b.toString('hex'), '00']);
  });
});

describe('WatchStream', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('opens on ready, yields the events in order, and stops the watcher once when the consumer stops', async () => {
    const stop = vi.fn();
    const w = new WatchStream('/w', stop);
    w.payload(payload(1, '/w/a'));
    w.payload(payload(0));
    const events = await w.opened(new AbortController().signal, 'slow');
    w.payload(payload(2, '/w/a'));
    w.payload(payload(1, 'relative'));
    const it = events[Symbol.asyncIterator]();
    expect((await it.next()).value).toEqual({ type: 'create', path: '/w/a' });
    expect((await it.next()).value).toEqual({ type: 'write', path: '/w/a' });
    await it.return!();
    w.stop();
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('a refusal before ready rejects opened() with the mapped error and stops the watcher', async () => {
    const stop = vi.fn();
    const w = new WatchStream('/w/nope', stop);
    w.payload(Buffer.from([255, 2, 0]));
    await expect(w.opened(new AbortController().signal, 'slow')).rejects.toMatchObject({ code: 'not_found' });
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('overflow is the last event: the stream ends and the watcher is stopped', async () => {
    const stop = vi.fn();
    const w = new WatchStream('/w', stop);
    w.started();
    const events = await w.opened(new AbortController().signal, 'slow');
    w.payload(payload(1, '/w/a'));
    w.payload(payload(6));
    w.payload(payload(1, '/w/late'));
    expect(await collect(events)).toEqual([{ type: 'create', path: '/w/a' }, { type: 'overflow' }]);
    expect(stop).toHaveBeenCalledTimes(1);
  });

  it('an abort stops the watcher and ends the events; a watcher gone after ready just ends them', async () => {
    const stop = vi.fn();
    const ac = new AbortController();
    const w = new WatchStream('/w', stop);
    w.started();
    const events = await w.opened(ac.signal, 'slow');
    w.payload(payload(3, '/w/a'));
    ac.abort();
    expect(await collect(events)).toEqual([{ type: 'remove', path: '/w/a' }]);
    expect(stop).toHaveBeenCalledTimes(1);

    const gone = new WatchStream('/w', vi.fn());
    gone.started();
    const rest = await gone.opened(new AbortController().signal, 'slow');
    gone.fail(new SbxError('provider_error', 'went away'));
    expect(await collect(rest)).toEqual([]);
  });

  it('a watcher that never gets ready is a timeout after WATCH_READY_TIMEOUT_MS', async () => {
    vi.useFakeTimers();
    const stop = vi.fn();
    const w = new WatchStream('/w', stop);
    const opened = w.opened(new AbortController().signal, 'the watcher took too long');
    const seen = expect(opened).rejects.toMatchObject({ code: 'timeout', message: 'the watcher took too long' });
    await vi.advanceTimersByTimeAsync(WATCH_READY_TIMEOUT_MS - 1);
    expect(stop).not.toHaveBeenCalled();
    await vi.advanceTimersByTimeAsync(1);
    await seen;
    expect(stop).toHaveBeenCalledTimes(1);
  });
});
