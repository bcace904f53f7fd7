import { pino, stdSerializers, type Logger } from 'pino';

export interface LoggerOptions {
  level?: string;
  /** `json`, `pretty` (one short line per record), or `auto` (pretty on a TTY). */
  format?: string;
  /** Secret values to scrub from every line, whatever field they hide in. */
  secrets?: string[];
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
}

/** Header and field paths that carry credentials. */
export const REDACT_PATHS = [
  'req.headers["x-api-key"]',
  'req.headers["x-admin-api-key"]',
  'req.headers["x-worker-token"]',
  'req.headers.authorization',
  'headers["x-api-key"]',
  'headers["x-admin-api-key"]',
  'headers["x-worker-token"]',
  'headers.authorization',
  '*.api_key',
  '*.admin_api_key',
  '*.token',
  '*.password',
  '*.env',
];

/**
 * `err` as pino writes it (`{type, message, stack, …}`), except that an SbxError — an expected
 * failure with a code, already answered to its caller — is `{type, code, message}`: no stack, and no
 * details (they go to the error body, and may be large).
 */
export function serializeErr(err: unknown): unknown {
  if (err instanceof Error && err.name === 'SbxError')
    return { type: 'SbxError', code: (err as { code?: unknown }).code, message: err.message };
  return stdSerializers.err(err as Error);
}

/**
 * The process logger: JSON or short lines to stderr, with credentials redacted by path and by value.
 * Each line is one JSON object with each key once: log calls pass a message string and keep an
 * error under `err`, never a `msg` of their own.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const dest = opts.destination ?? process.stderr;
  const secrets = (opts.secrets ?? []).filter((s) => s.length >= 4).sort((a, b) => b.length - a.length);
  const pretty = opts.format === 'pretty' || (opts.format !== 'json' && dest.isTTY === true);
  const scrub = (line: string) => {
    let out = line;
    for (const s of secrets) out = out.split(s).join('[redacted]');
    return out;
  };
  const stream = {
    write(line: string) {
      const clean = scrub(line);
      dest.write(pretty ? prettyLine(clean) : clean);
    },
  };
  return pino(
    {
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      serializers: { err: serializeErr },
      base: undefined,
    },
    stream,
  );
}

const LEVELS: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

function prettyLine(json: string): string {
  try {
    const { level, time, msg, ...rest } = JSON.parse(json) as Record<string, unknown>;
    const t = new Date(typeof time === 'number' ? time : Date.now()).toISOString().slice(11, 19);
    const extra = Object.keys(rest).length > 0 ? ' ' + JSON.stringify(rest) : '';
    return `${t} ${LEVELS[level as number] ?? level} ${msg ?? ''}${extra}\n`;
  } catch {
    return json;
  }
}
