import { constants, existsSync, statSync } from 'node:fs';
import { access } from 'node:fs/promises';
import { request } from 'node:http';
import { delimiter, dirname, isAbsolute, join } from 'node:path';
import { SbxError } from '../../../core/errors.js';
import type { CliContext } from '../context.js';
import { messageFor } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import type { CommandSpec } from '../spec.js';

type Status = 'ok' | 'warn' | 'fail' | 'skip';

export interface CheckResult {
  title: string;
  status: Status;
  detail: string;
  fix: string;
}

interface Check {
  title: string;
  fix: string;
  /** The fix for a failure that is not the one `fix` is about (e.g. a 429 on a key check). */
  fixFor?: (err: unknown) => string | undefined;
  check: () => Promise<{ status: Status; detail: string; fix?: string }>;
}

/** Key fixes apply to refused credentials only; anything else gets a neutral hint. */
const unlessKeyRefused = (err: unknown): string | undefined =>
  err instanceof SbxError && (err.code === 'unauthorized' || err.code === 'forbidden') ? undefined : 'see the detail; run the request again, or check the server log';

type LoadedConfig = Awaited<ReturnType<typeof import('../../../config/index.js').loadConfig>>['config'];

/** GET /_ping on a Docker engine socket (no dockerode: doctor must stay light). */
export function pingDocker(socketPath: string, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: '/_ping', method: 'GET', timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(body.trim() || 'OK') : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** First executable named `bin` (a path, or looked up on PATH). */
export function findExecutable(bin: string, pathEnv: string | undefined): string | undefined {
  const candidates = isAbsolute(bin) || bin.includes('/') ? [bin] : (pathEnv ?? '').split(delimiter).filter(Boolean).map((d) => join(d, bin));
  return candidates.find((p) => {
    try {
      return statSync(p).isFile() && (statSync(p).mode & 0o111) !== 0;
    } catch {
      return false;
    }
  });
}

/** The nearest existing directory at or above `path`. */
function existingAncestor(path: string): string {
  let p = path;
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return p;
}

function serverChecks(ctx: CliContext, state: { reachable: boolean; providers: Array<{ name: string; healthy: boolean; error?: string }> }): Check[] {
  const { client, config } = ctx;
  const keys = { apiKey: Boolean(config.apiKey), adminKey: Boolean(config.adminKey) };
  const needServer = async <T>(fn: () => Promise<T>) => (state.reachable ? fn() : undefined);
  const checks: Check[] = [
    {
      title: 'server reachable',
      fix: `start the server with \`sbx serve\`, or point --url / SBX_URL at it (tried ${client.url})`,
      async check() {
        // Liveness needs no key, so reachability is checked apart from auth.
        const h = await client.live({ signal: ctx.signal });
        state.reachable = true;
        return { status: 'ok', detail: `${client.url} — sbx ${h.version}, up ${h.uptime}` };
      },
    },
    {
      title: 'API key accepted',
      fix: 'pass --api-key or set SBX_API_KEY to the server auth.api_key',
      fixFor: unlessKeyRefused,
      async check() {
        const r = await needServer(() => client.list({ signal: ctx.signal }));
        if (r === undefined) return { status: 'skip', detail: 'server not reachable' };
        return { status: 'ok', detail: keys.apiKey ? 'accepted' : 'the server does not require a key' };
      },
    },
  ];
  if (config.adminKey) {
    checks.push({
      title: 'admin key accepted',
      fix: 'pass --admin-key or set SBX_ADMIN_API_KEY to the server auth.admin_api_key',
      fixFor: unlessKeyRefused,
      async check() {
        const r = await needServer(() => client.diagnostics({ signal: ctx.signal }));
        if (r === undefined) return { status: 'skip', detail: 'server not reachable' };
        return { status: 'ok', detail: 'accepted' };
      },
    });
  }
  checks.push({
    title: 'server ready',
    fix: 'make at least one provider healthy (see the provider rows and `sbx providers`)',
    async check() {
      const r = await needServer(() => client.ready({ signal: ctx.signal }));
      if (r === undefined) return { status: 'skip', detail: 'server not reachable' };
      state.providers = r.providers;
      const detail = `${r.ready_providers} of ${r.total_providers} provider${r.total_providers === 1 ? '' : 's'} healthy`;
      return { status: r.ready_providers > 0 ? 'ok' : 'fail', detail };
    },
  });
  return checks;
}

const PROVIDER_FIX: Record<string, string> = {
  docker: 'start the Docker engine, or fix providers.docker.socket_path',
  proot: 'install proot and point providers.proot.rootfs at a root filesystem with /bin/sh',
  mock: 'the mock provider runs on the host; check providers.mock.root_dir is writable',
};

function localChecks(ctx: CliContext, configFile: string | undefined): Check[] {
  let loaded: LoadedConfig | undefined;
  let loadError: string | undefined;
  const load = async () => {
    if (loaded || loadError) return loaded;
    try {
      const { loadConfig } = await import('../../../config/index.js');
      loaded = (await loadConfig({ file: configFile, env: ctx.env, cwd: ctx.cwd, home: ctx.home })).config;
    } catch (err) {
      const problems = (err as { problems?: string[] }).problems;
      loadError = problems ? problems.join('; ') : (err as Error).message;
    }
    return loaded;
  };
  return [
    {
      title: 'configuration',
      fix: 'run `sbx config lint` for every finding and its fix',
      async check() {
        const config = await load();
        if (!config) return { status: 'fail', detail: `does not load: ${loadError}`, fix: 'fix the keys named above (see `sbx config lint`)' };
        const { lintConfig } = await import('../../../config/index.js');
        const findings = lintConfig(config, { production: false });
        const fails = findings.filter((f) => f.level === 'fail');
        if (findings.length === 0) return { status: 'ok', detail: 'loads; no lint findings' };
        const keys = findings.map((f) => f.key).join(', ');
        return { status: fails.length > 0 ? 'fail' : 'warn', detail: `${fails.length} failure(s), ${findings.length - fails.length} warning(s): ${keys}` };
      },
    },
    {
      title: 'local Docker engine',
      fix: 'start dockerd (or set providers.docker.socket_path); without Docker, sbx serve falls back to proot or mock',
      async check() {
        const config = await load();
        const socket = config?.providers.docker.socket_path || '/var/run/docker.sock';
        const required = config?.providers.default === 'docker';
        try {
          const answer = await pingDocker(socket);
          return { status: 'ok', detail: `${socket} answers ${answer}` };
        } catch (err) {
          return { status: required ? 'fail' : 'warn', detail: `${socket}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
        }
      },
    },
    {
      title: 'proot and rootfs',
      fix: 'install proot (apt-get install proot) and set providers.proot.rootfs to a directory with /bin/sh',
      async check() {
        const config = await load();
        const required = config?.providers.default === 'proot';
        const bin = findExecutable(config?.providers.proot.binary || 'proot', ctx.env.PATH);
        const rootfs = config?.providers.proot.rootfs ?? '';
        const hasRootfs = rootfs !== '' && existsSync(join(rootfs, 'bin', 'sh'));
        if (bin && hasRootfs) return { status: 'ok', detail: `${bin}, rootfs ${rootfs}` };
        const missing = [bin ? undefined : 'proot binary not found', hasRootfs ? undefined : rootfs ? `no /bin/sh under ${rootfs}` : 'providers.proot.rootfs not set'].filter(Boolean).join('; ');
        return { status: required ? 'fail' : 'warn', detail: missing };
      },
    },
    {
      title: 'store path writable',
      fix: 'set database.path to a writable location, or fix the directory permissions',
      async check() {
        const config = await load();
        if (!config) return { status: 'skip', detail: 'configuration does not load' };
        if (config.database.driver !== 'sqlite') return { status: 'skip', detail: `${config.database.driver} (checked by the server)` };
        const path = config.database.path;
        const target = existsSync(path) ? path : existingAncestor(dirname(path));
        try {
          await access(target, constants.W_OK);
          return { status: 'ok', detail: path };
        } catch {
          return { status: 'fail', detail: `${target} is not writable (database.path ${path})` };
        }
      },
    },
  ];
}

export const doctorCommand: CommandSpec = {
  name: 'doctor',
  summary: 'check the server, keys, providers and the local setup; exit 1 when a check fails',
  options: [{ flags: '-c, --config <file>', description: 'server config file for the local checks (env SBX_CONFIG)', complete: 'file' }],
  async run(ctx, opts: { config?: string }) {
    const state = { reachable: false, providers: [] as Array<{ name: string; healthy: boolean; error?: string }> };
    const results: CheckResult[] = [];
    const runOne = async (c: Check) => {
      try {
        const r = await c.check();
        results.push({ title: c.title, status: r.status, detail: r.detail, fix: r.fix ?? c.fix });
      } catch (err) {
        const detail = err instanceof SbxError ? messageFor(err, { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) }) : (err as Error).message;
        results.push({ title: c.title, status: 'fail', detail, fix: c.fixFor?.(err) ?? c.fix });
      }
    };
    await ctx.out.spin('running checks', async () => {
      for (const c of serverChecks(ctx, state)) await runOne(c);
      for (const p of state.providers) {
        results.push({
          title: `provider ${p.name}`,
          status: p.healthy ? 'ok' : 'fail',
          detail: p.healthy ? 'healthy' : (p.error ?? 'unhealthy'),
          fix: PROVIDER_FIX[p.name] ?? `see \`sbx providers ${p.name}\``,
        });
      }
      for (const c of localChecks(ctx, opts.config)) await runOne(c);
    });
    const failed = results.some((r) => r.status === 'fail');
    const { out } = ctx;
    if (out.json) {
      out.printJson({ ok: !failed, checks: results });
    } else {
      const mark: Record<Status, string> = { ok: out.c.green('ok'), warn: out.c.yellow('warn'), fail: out.c.red('FAIL'), skip: out.c.dim('skip') };
      out.table([
        { header: 'STATUS', value: (r: CheckResult) => r.status, style: (t: string, r: CheckResult) => t.replace(r.status, mark[r.status]) },
        { header: 'CHECK', value: (r: CheckResult) => r.title },
        { header: 'DETAIL', value: (r: CheckResult) => r.detail },
      ], results);
      const toFix = results.filter((r) => r.status === 'fail' || r.status === 'warn');
      if (toFix.length > 0) {
        out.line('');
        for (const r of toFix) out.line(`${r.status === 'fail' ? out.c.red('✖') : out.c.yellow('!')} ${r.title}: ${r.fix}`);
      }
    }
    return failed ? EXIT.failure : 0;
  },
};
