import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createControlPlane, type ControlPlane } from '../../src/compose/control-plane.js';
import { loadConfig } from '../../src/config/index.js';
import { mergeOverrides } from '../helpers/server.js';

export interface OutputLine {
  stream: 'stdout' | 'stderr' | 'truncated' | 'exit';
  offset: number;
  data?: string;
  encoding?: 'base64';
  exit_code?: number | null;
  state?: string;
}

/** A control plane over one directory (SQLite file, home) that can be stopped and started again. */
export class RestartablePlane {
  readonly dir = mkdtempSync(join(tmpdir(), 'sbx-proc-'));
  plane: ControlPlane | undefined;
  url = '';

  private installation: string | undefined;

  /** `cleanup` removes what the provider made outside the directory (docker's containers), by installation id. */
  constructor(
    private readonly overrides: (dir: string) => Record<string, unknown>,
    private readonly cleanup?: (installationId: string) => Promise<void>,
  ) {}

  async start(): Promise<string> {
    const base = {
      server: { host: '127.0.0.1', port: 0 },
      database: { driver: 'sqlite', path: join(this.dir, 'sbx.db') },
      logging: { level: 'silent' },
    };
    const { config } = await loadConfig({
      cwd: this.dir,
      home: this.dir,
      env: {},
      overrides: mergeOverrides(base, this.overrides(this.dir)) as never,
    });
    this.plane = await createControlPlane(config, { logger: pino({ level: 'silent' }), home: this.dir });
    this.installation = this.plane.installationId;
    this.url = await this.plane.listen();
    return this.url;
  }

  async stop(): Promise<void> {
    await this.plane?.close();
    this.plane = undefined;
  }

  async remove(): Promise<void> {
    await this.stop();
    if (this.installation) await this.cleanup?.(this.installation);
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Reads the output NDJSON from `offset`; with `stopAfter`, the connection is cut once that many
 * output bytes arrived (a client that goes away mid-stream). Returns the lines and the bytes.
 */
export async function readOutput(
  base: string,
  sandbox: string,
  pid: string,
  opts: { offset?: number; follow?: boolean; stopAfter?: number } = {},
): Promise<{ lines: OutputLine[]; bytes: Buffer; status: number; next: number }> {
  const ac = new AbortController();
  const q = `offset=${opts.offset ?? 0}${opts.follow ? '&follow=true' : ''}`;
  const res = await fetch(`${base}/api/v1/sandboxes/${sandbox}/processes/${pid}/output?${q}`, { signal: ac.signal });
  const lines: OutputLine[] = [];
  const parts: Buffer[] = [];
  let next = opts.offset ?? 0;
  if (res.status !== 200) return { lines, bytes: Buffer.alloc(0), status: res.status, next };
  const reader = res.body!.getReader();
  let buf = '';
  let got = 0;
  const dec = new TextDecoder();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += dec.decode(value, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = JSON.parse(buf.slice(0, nl)) as OutputLine;
        buf = buf.slice(nl + 1);
        lines.push(line);
        if (line.stream === 'stdout' || line.stream === 'stderr') {
          const b = Buffer.from(line.data ?? '', line.encoding === 'base64' ? 'base64' : 'utf8');
          if (line.offset !== next) throw new Error(`gap: chunk at ${line.offset}, expected ${next}`);
          parts.push(b);
          got += b.byteLength;
          next = line.offset + b.byteLength;
        }
        if (opts.stopAfter !== undefined && got >= opts.stopAfter) {
          ac.abort();
          return { lines, bytes: Buffer.concat(parts), status: 200, next };
        }
      }
    }
  } catch (err) {
    if (!ac.signal.aborted) throw err;
  }
  return { lines, bytes: Buffer.concat(parts), status: 200, next };
}
