import { SbxError } from '../../../contracts/errors.js';
import type { CliContext } from '../context.js';
import { messageFor } from '../errors.js';
import { EXIT } from '../exit-codes.js';
import { localChecks, type Check, type Status } from '../shared/doctor-local.js';
import type { CommandSpec } from '../spec.js';

export interface CheckResult {
  title: string;
  status: Status;
  detail: string;
  fix: string;
}

/** Key fixes apply to refused credentials only; anything else gets a neutral hint. */
const unlessKeyRefused = (err: unknown): string | undefined =>
  err instanceof SbxError && (err.code === 'unauthorized' || err.code === 'forbidden')
    ? undefined
    : 'see the detail; run the request again, or check the server log';

interface DoctorState {
  reachable: boolean;
  providers: ProviderRow[];
  /** The server said which default image it uses: the local config's is not checked then. */
  serverImage: boolean;
}

/** The server's default image on its docker engine (`GET /providers/docker` → config). */
function serverImageCheck(ctx: CliContext, state: DoctorState): Check {
  return {
    title: 'server default image',
    fix:
      "let the server's engine pull it once (registry access), or spawn with --image NAME / set the " +
      "server's defaults.image to an image its engine has",
    async check() {
      if (!state.reachable) return { status: 'skip', detail: 'server not reachable' };
      if (!state.providers.some((p) => p.name === 'docker')) return { status: 'skip', detail: 'no docker provider runs on this server' };
      const config = (await ctx.client.providers.get('docker', { signal: ctx.signal })).config as {
        default_image?: string;
        image_present?: boolean | null;
      };
      if (config.default_image === undefined) return { status: 'skip', detail: 'this server does not say (an older sbx)' };
      state.serverImage = true;
      const image = config.default_image;
      if (config.image_present === true) return { status: 'ok', detail: `${image} is present on the server's engine` };
      if (config.image_present === null) return { status: 'warn', detail: `${image}: the server cannot ask its engine; pull not verified` };
      return {
        status: 'warn',
        detail: `${image} is not present on the server's engine: pull not verified (the first docker spawn pulls it)`,
      };
    },
  };
}

function serverChecks(ctx: CliContext, state: DoctorState): Check[] {
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
  checks.push({
    title: 'workers',
    fix: 'check the stale or draining workers: their host, `sbx worker` process and link to this server (`sbx workers`)',
    async check() {
      const ws = await needServer(() => client.workers.list({ signal: ctx.signal }));
      if (ws === undefined) return { status: 'skip', detail: 'server not reachable' };
      const remote = ws.filter((w) => w.id !== 'local');
      const stale = remote.filter((w) => w.stale).map((w) => w.id);
      const draining = remote.filter((w) => !w.stale && w.status === 'draining').map((w) => w.id);
      const online = remote.filter((w) => !w.stale && w.status === 'online').length;
      if (remote.length === 0)
        return {
          status: 'ok',
          detail: ws.some((w) => w.id === 'local') ? 'single node: this server runs its sandboxes itself' : 'none registered',
        };
      const parts = [`${remote.length} remote: ${online} online`];
      if (draining.length > 0) parts.push(`draining ${draining.join(', ')}`);
      if (stale.length > 0) parts.push(`stale ${stale.join(', ')}`);
      return { status: stale.length > 0 ? 'warn' : 'ok', detail: parts.join('; ') };
    },
  });
  checks.push(serverImageCheck(ctx, state));
  checks.push({
    title: 'network filtered',
    fix: 'filtered (egress rules) needs the docker provider with a local rootful engine and sbx serve running as root; see the detail',
    async check() {
      const providers = await needServer(() => client.providers.list({ signal: ctx.signal }));
      if (providers === undefined) return { status: 'skip', detail: 'server not reachable' };
      if (!providers.some((p) => p.name === 'docker'))
        return { status: 'skip', detail: 'not available: no docker provider runs on this server' };
      const docker = await client.providers.get('docker', { signal: ctx.signal });
      const filtered = (docker.config as Record<string, unknown>).filtered;
      if (filtered === 'available') return { status: 'ok', detail: 'available: docker sandboxes can be limited to allowed hosts' };
      return {
        status: 'skip',
        detail: `not available: ${typeof filtered === 'string' ? filtered : 'this server does not enforce egress rules'}`,
      };
    },
  });
  checks.push({
    title: 'database',
    fix:
      'check the database the server uses (database.driver, database.dsn or database.path) and that it ' +
      'answers; the server recovers by itself once it does',
    async check() {
      let d;
      try {
        d = await needServer(() => client.diagnostics({ signal: ctx.signal }));
      } catch (err) {
        if (err instanceof SbxError && (err.code === 'unauthorized' || err.code === 'forbidden'))
          return { status: 'skip', detail: 'diagnostics need the admin key (--admin-key)' };
        throw err;
      }
      if (d === undefined) return { status: 'skip', detail: 'server not reachable' };
      return databaseRow(d as unknown as DiagnosticsView);
    },
  });
  return checks;
}

interface DiagnosticsView {
  store: { healthy: boolean; latency_ms: number; driver?: string };
  replica?: { id: string; shared: boolean; live: string[] | null };
  leaders?: Record<string, string | null> | null;
}

/** The database row: driver and latency, and with replicas which are live and who leads what. */
export function databaseRow(d: DiagnosticsView): { status: Status; detail: string } {
  const driver = d.store.driver ?? 'store';
  if (!d.store.healthy) return { status: 'fail', detail: `${driver} does not answer` };
  const parts = [`${driver}, ${d.store.latency_ms.toFixed(1)} ms`];
  const r = d.replica;
  if (r?.shared) {
    const live = r.live ?? [];
    parts.push(`replicas ${live.join(', ') || 'none live'} (this one: ${r.id})`);
    const leaders = Object.entries(d.leaders ?? {})
      .filter(([, v]) => v !== null)
      .map(([task, holder]) => `${task} ${holder}`);
    if (leaders.length > 0) parts.push(`leaders: ${leaders.join(', ')}`);
  }
  return { status: 'ok', detail: parts.join('; ') };
}

const PROVIDER_FIX: Record<string, string> = {
  docker: 'start the Docker engine, or fix the Docker endpoint (providers.docker.socket_path / host, DOCKER_HOST)',
  proot: 'install proot and point providers.proot.rootfs at a root filesystem with /bin/sh',
  mock: 'the mock provider runs on the host; check providers.mock.root_dir is writable',
};

type ProviderRow = { name: string; healthy: boolean; default?: boolean; error?: string; warning?: string };

/**
 * One row per provider of the server's readiness. A healthy provider that isolates nothing is a
 * warning when it is the default: mock always, proot when its health carries a warning (no PID namespace).
 */
export function providerRows(providers: readonly ProviderRow[]): CheckResult[] {
  return providers.map((p) => {
    if (!p.healthy)
      return {
        title: `provider ${p.name}`,
        status: 'fail',
        detail: p.error ?? 'unhealthy',
        fix: PROVIDER_FIX[p.name] ?? `see \`sbx providers ${p.name}\``,
      };
    const unisolated = p.name === 'mock' ? 'commands run directly on the host, as the server user: no isolation' : p.warning;
    const role = p.default ? 'the default provider' : 'a provider';
    if (unisolated && p.default) {
      return {
        title: `provider ${p.name}`,
        status: 'warn',
        detail: `healthy, but ${role} isolates nothing: ${unisolated}`,
        fix: 'for untrusted code make docker the default (providers.default: docker), or proot where a PID namespace can be made',
      };
    }
    const detail = unisolated ? `healthy; ${unisolated}` : 'healthy';
    return { title: `provider ${p.name}`, status: 'ok', detail, fix: PROVIDER_FIX[p.name] ?? `see \`sbx providers ${p.name}\`` };
  });
}

export const doctorCommand: CommandSpec = {
  name: 'doctor',
  summary: 'check the server, keys, providers and the local setup; exit 1 when a check fails',
  options: [{ flags: '-c, --config <file>', description: 'server config file for the local checks (env SBX_CONFIG)', complete: 'file' }],
  async run(ctx, opts: { config?: string }) {
    const state: DoctorState = { reachable: false, providers: [], serverImage: false };
    const results: CheckResult[] = [];
    const runOne = async (c: Check) => {
      try {
        const r = await c.check();
        results.push({ title: c.title, status: r.status, detail: r.detail, fix: r.fix ?? c.fix });
      } catch (err) {
        const detail =
          err instanceof SbxError
            ? messageFor(err, { apiKey: Boolean(ctx.config.apiKey), adminKey: Boolean(ctx.config.adminKey) })
            : (err as Error).message;
        results.push({ title: c.title, status: 'fail', detail, fix: c.fixFor?.(err) ?? c.fix });
      }
    };
    await ctx.out.spin('running checks', async () => {
      for (const c of serverChecks(ctx, state)) await runOne(c);
      results.push(...providerRows(state.providers));
      for (const c of localChecks(ctx, opts.config)) {
        // The server named its own default image: the local config's would be beside the point.
        if (c.title === 'default image' && state.serverImage) continue;
        await runOne(c);
      }
    });
    const failed = results.some((r) => r.status === 'fail');
    const { out } = ctx;
    if (out.json) {
      out.printJson({ ok: !failed, checks: results });
    } else {
      const mark: Record<Status, string> = {
        ok: out.c.green('ok'),
        warn: out.c.yellow('warn'),
        fail: out.c.red('FAIL'),
        skip: out.c.dim('skip'),
      };
      out.table(
        [
          {
            header: 'STATUS',
            value: (r: CheckResult) => r.status,
            style: (t: string, r: CheckResult) => t.replace(r.status, mark[r.status]),
          },
          { header: 'CHECK', value: (r: CheckResult) => r.title },
          { header: 'DETAIL', value: (r: CheckResult) => r.detail },
        ],
        results,
      );
      const toFix = results.filter((r) => r.status === 'fail' || r.status === 'warn');
      if (toFix.length > 0) {
        out.line('');
        for (const r of toFix) out.line(`${r.status === 'fail' ? out.c.red('✖') : out.c.yellow('!')} ${r.title}: ${r.fix}`);
      }
    }
    return failed ? EXIT.failure : 0;
  },
};
