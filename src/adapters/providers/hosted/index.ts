import { withoutCredentials } from '../../../core/url-credentials.js';
import { isSbxError, SbxError } from '../../../core/errors.js';
import type {
  ConsoleLog,
  ConsoleQuery,
  ExecEvent,
  ExecSpec,
  Provider,
  ProviderHealth,
  RuntimeInfo,
  RuntimeStatus,
  SpawnResult,
  SpawnSpec,
} from '../../../core/ports/index.js';
import { ConsoleRing } from '../shared/console-ring.js';
import { HostedApi } from './api.js';
import { Envd } from './envd.js';
import { hostedExec } from './exec.js';
import { HostedFiles } from './files.js';
import { type HostedProviderOptions, META_INSTALLATION, META_MANAGED, META_OWNER, META_SANDBOX, resolveOptions } from './options.js';

export type { HostedProviderOptions } from './options.js';

/** `console`: output of the execs this provider ran, kept in memory (E2B keeps no console of its own for sbx to read). */
export const HOSTED_CAPABILITIES = ['spawn', 'exec', 'exec_stream', 'files', 'console', 'health', 'runtime_inventory'] as const;

/** Most console rings kept at once; the least recently written goes first. */
const MAX_RINGS = 1024;

/**
 * The hosted provider: sandboxes on E2B (or an E2B-compatible service). Lifecycle through the REST
 * API (`POST/GET/DELETE /sandboxes`), exec and files through each sandbox's envd. See
 * docs/providers/hosted.md for the mapping and what was verified where.
 */
export function createHostedProvider(options: HostedProviderOptions): Provider {
  const o = resolveOptions(options);
  const api = new HostedApi(o);
  const envd = new Envd(o, api);
  const files = new HostedFiles(envd);
  const rings = new Map<string, ConsoleRing>();

  const ring = (id: string): ConsoleRing => {
    let r = rings.get(id);
    if (r) rings.delete(id);
    else {
      r = new ConsoleRing();
      if (rings.size >= MAX_RINGS) rings.delete(rings.keys().next().value!);
    }
    rings.set(id, r);
    return r;
  };

  /** Fails with not_found when the sandbox is gone (for operations that touch no envd). */
  const requireRunning = async (id: string, what: string, signal?: AbortSignal) => {
    if (!(await api.get(id, signal, what))) {
      rings.delete(id);
      envd.forget(id);
      throw new SbxError('not_found', `${what}: the sandbox runtime is gone`);
    }
  };

  // `base_url` as shown (details, health): never its user-info, query or fragment.
  const shownUrl = withoutCredentials(o.baseUrl);
  return {
    name: o.name,
    capabilities: HOSTED_CAPABILITIES,
    // No key, no token: provider details are shown to API callers.
    config: () => ({ runtime: 'e2b', network_mode: 'hosted', base_url: shownUrl, template: o.template, user: o.user }),

    async health(signal?: AbortSignal): Promise<ProviderHealth> {
      const started = performance.now();
      const latency = () => Math.round(performance.now() - started);
      try {
        const own = await api.listOwn(signal, 'health');
        return { healthy: true, latency_ms: latency(), runtime_count: own.length };
      } catch (err) {
        const msg = isSbxError(err) ? err.message.replace(/^health: /, '') : 'hosted provider failed';
        return { healthy: false, latency_ms: latency(), error: `${shownUrl}: ${msg}` };
      }
    },

    async spawn(spec: SpawnSpec, signal?: AbortSignal): Promise<SpawnResult> {
      const metadata: Record<string, string> = { [META_MANAGED]: 'true', [META_SANDBOX]: spec.sandbox_id };
      if (o.installationId) metadata[META_INSTALLATION] = o.installationId;
      if (spec.owner_id) metadata[META_OWNER] = spec.owner_id;
      if (spec.network === 'filtered')
        throw new SbxError('not_implemented', 'hosted sandboxes cannot be filtered: egress rules are enforced only on the docker provider');
      const allowInternetAccess = spec.network === 'none' ? false : spec.network === 'bridge' ? true : undefined;
      const rec = await api.create({ metadata, allowInternetAccess }, signal);
      envd.remember(rec);
      try {
        // sbx's sandboxes work in /workspace; E2B templates start without it.
        await envd.unary(rec.sandboxID, 'filesystem.Filesystem/MakeDir', { path: '/workspace' }, 'spawn', signal).catch((err: unknown) => {
          if (!(isSbxError(err) && err.code === 'conflict')) throw err;
        });
      } catch (err) {
        await api.kill(rec.sandboxID).catch(() => undefined);
        envd.forget(rec.sandboxID);
        throw err;
      }
      return { runtime_id: rec.sandboxID, network: spec.network === 'none' ? 'none' : 'internet' };
    },

    async destroy(runtimeId: string, signal?: AbortSignal): Promise<void> {
      await api.kill(runtimeId, signal);
      envd.forget(runtimeId);
      rings.delete(runtimeId);
    },

    async status(runtimeId: string, signal?: AbortSignal): Promise<RuntimeStatus> {
      const rec = await api.get(runtimeId, signal);
      if (!rec) return 'missing';
      return rec.state === 'paused' ? 'stopped' : 'running';
    },

    async listRuntimes(signal?: AbortSignal): Promise<RuntimeInfo[]> {
      return (await api.listOwn(signal)).map((r) => ({
        runtime_id: r.sandboxID,
        sandbox_id: r.metadata?.[META_SANDBOX] ?? null,
        installation_id: r.metadata?.[META_INSTALLATION] ?? null,
        status: r.state === 'paused' ? 'stopped' : 'running',
      }));
    },

    exec(runtimeId: string, spec: ExecSpec, signal: AbortSignal): AsyncIterable<ExecEvent> {
      return {
        [Symbol.asyncIterator]: async function* () {
          const r = ring(runtimeId);
          const tag = Math.random().toString(36).slice(2);
          try {
            yield* hostedExec(envd, runtimeId, spec, signal, (stream, data) => r.append(data, `${tag}:${stream}`));
          } finally {
            r.flush(`${tag}:stdout`);
            r.flush(`${tag}:stderr`);
          }
        },
      };
    },

    writeFile: (id, path, content, mode, signal) => files.write(id, path, content, mode, signal),
    readFile: (id, path, signal, maxBytes) => files.read(id, path, maxBytes, signal),
    openFile: (id, path, signal, maxBytes) => files.open(id, path, maxBytes, signal),
    deleteFile: (id, path, recursive, signal) => files.remove(id, path, recursive, signal),
    listFiles: (id, path, signal) => files.list(id, path, signal),
    moveFile: (id, from, to, signal) => files.move(id, from, to, signal),
    chmod: (id, path, mode, signal) => files.chmod(id, path, mode, signal),
    stat: (id, path, signal) => files.stat(id, path, signal),
    glob: (id, pattern, signal) => files.glob(id, pattern, signal),

    async logs(runtimeId: string, query: ConsoleQuery, signal?: AbortSignal): Promise<ConsoleLog> {
      await requireRunning(runtimeId, 'logs', signal);
      return rings.get(runtimeId)?.read(query) ?? { lines: [], cursor: 0 };
    },

    close: async () => {
      rings.clear();
    },
  };
}
