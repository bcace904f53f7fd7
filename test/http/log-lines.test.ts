import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SbxError } from '../../src/core/errors.js';
import { createLogger, serializeErr } from '../../src/log/logger.js';
import { call } from '../helpers/http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Keys that occur twice in one object of a JSON text, at any depth (`JSON.parse` keeps the last
 * silently, so a line like `{"msg":"a","msg":"b"}` parses fine and still breaks log tooling).
 */
export function duplicateKeys(text: string): string[] {
  const dups: string[] = [];
  const stack: Array<Set<string> | null> = []; // one entry per open object (a Set) or array (null)
  let i = 0;
  let expectKey = false;
  const readString = (): string => {
    const start = i;
    i++; // opening quote
    while (text[i] !== '"') i += text[i] === '\\' ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i)) as string;
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === '{') {
      stack.push(new Set());
      expectKey = true;
      i++;
    } else if (c === '[') {
      stack.push(null);
      expectKey = false;
      i++;
    } else if (c === '}' || c === ']') {
      stack.pop();
      expectKey = false;
      i++;
    } else if (c === ',') {
      expectKey = stack.at(-1) instanceof Set;
      i++;
    } else if (c === '"') {
      const s = readString();
      const keys = stack.at(-1);
      if (expectKey && keys) {
        if (keys.has(s)) dups.push(s);
        keys.add(s);
      }
      expectKey = false;
    } else i++;
  }
  return dups;
}

describe('log lines are JSON objects with each key once', () => {
  let srv: TestServer;
  let logs = '';

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        logs += chunk.toString();
        cb();
      },
    });
    srv = await startTestServer({ defaults: { max_sandboxes: 1 }, logging: { level: 'debug', format: 'json' } }, () => ({
      logger: createLogger({ level: 'debug', format: 'json', destination: sink }),
    }));
  });

  afterAll(async () => srv?.close());

  it('the duplicate-key check finds what JSON.parse hides', () => {
    expect(duplicateKeys('{"msg":"exec cancelled","msg":"request failed"}')).toEqual(['msg']);
    expect(duplicateKeys('{"a":{"b":1,"c":{"b":2}},"d":[{"b":3},{"b":4}],"e":"\\"b\\":"}')).toEqual([]);
    expect(duplicateKeys('{"a":[{"x":1,"x":2}],"b":"x"}')).toEqual(['x']);
  });

  it('err: an SbxError is {type, code, message}; any other error keeps its stack', () => {
    expect(serializeErr(new SbxError('provider_error', 'engine gone', { stdout: 'x'.repeat(100) }))).toEqual({
      type: 'SbxError',
      code: 'provider_error',
      message: 'engine gone',
    });
    const other = serializeErr(Object.assign(new TypeError('boom'), { code: 'E_BOOM' })) as Record<string, unknown>;
    expect(other).toMatchObject({ type: 'TypeError', message: 'boom', code: 'E_BOOM' });
    expect(String(other.stack)).toContain('TypeError: boom\n    at ');
  });

  it('a failed request logs its error under err, beside one msg', async () => {
    const first = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(first.status).toBe(201);
    const full = await call(srv.url, 'POST', '/api/v1/sandboxes', {});
    expect(full.status).toBe(503);
    expect(full.body.code).toBe('unavailable');
    // Some ordinary traffic too: a 4xx, a 404, an exec, a destroy.
    expect((await call(srv.url, 'POST', '/api/v1/sandboxes', { ttl: 'soon' })).status).toBe(400);
    expect((await call(srv.url, 'GET', '/api/v1/nope')).status).toBe(404);
    expect((await call(srv.url, 'POST', `/api/v1/sandboxes/${first.body.id}/exec`, { command: 'echo hi' })).body.stdout).toBe('hi\n');
    expect((await call(srv.url, 'DELETE', `/api/v1/sandboxes/${first.body.id}`)).status).toBe(200);

    const lines = logs.split('\n').filter((l) => l.length > 0);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) {
      expect(duplicateKeys(line), line).toEqual([]);
      expect(typeof JSON.parse(line).msg, line).toBe('string');
    }
    const failed = lines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((r) => r.msg === 'request failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ level: 40, msg: 'request failed' });
    // The expected failure without its stack or details; the message is the one the caller got.
    expect(failed[0]!.err).toEqual({ type: 'SbxError', code: 'unavailable', message: full.body.message });
    expect(failed[0]!.reqId).toBe(full.headers.get('x-request-id'));
  });
});
