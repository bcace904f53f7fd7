import { homedir, networkInterfaces } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { EgressLists } from '../core/network/rules.js';
import type { Provider, SandboxStore } from '../core/ports/index.js';
import type { SecretSource } from '../core/secrets/port.js';
import type { FilteredNetwork } from '../adapters/providers/docker/egress.js';
import type { VerdictRecord } from '../transports/egress/gateway.js';
import { loadInterception } from './egress-secrets.js';

/** What compose keeps of the running egress enforcement. */
export interface EgressHandle {
  /** Why filtered is not available here, or null when it is. */
  reason: string | null;
  close(): Promise<void>;
}

export interface EgressDeps {
  config: SbxConfig;
  providers: readonly Provider[];
  /** A live filtered sandbox's lists, or null (unknown, gone, not filtered: denied). */
  rules(sandboxId: string): Promise<EgressLists | null>;
  /** A sandbox's bound secrets with their values (DESIGN.md §15), for the gateway's interception. */
  secrets?: SecretSource;
  logger: Logger;
  /** Each verdict (metrics, events, console lines). */
  onVerdict?(v: VerdictRecord): void;
  /** Name → addresses for the gateway (tests inject one; default: the hosts file, then its own node:dns Resolver). */
  resolve?(name: string): Promise<string[]>;
  /** Home of the data dir (`<home>/.sbx`): the node's egress CA and the sandboxes' trust bundles live there. */
  home?: string;
  /** A request went on with a secret injected (`sbx_egress_secret_injections_total`). */
  onInjection?(sandboxId: string): void;
}

const LIVE = new Set(['running', 'paused', 'unhealthy', 'error']);

/** The lists of a live filtered sandbox in the control plane's store (DESIGN §10: read per connection). */
export function storeRules(store: Pick<SandboxStore, 'getSandbox'>): (sandboxId: string) => Promise<EgressLists | null> {
  return async (id) => {
    const rec = await store.getSandbox(id);
    if (!rec || rec.network !== 'filtered' || !LIVE.has(rec.state)) return null;
    return rec.egress ?? { allow: [], deny: [] };
  };
}

function ownAddresses(): string[] {
  return Object.values(networkInterfaces())
    .flat()
    .flatMap((a) => (a ? [a.address] : []));
}

/**
 * Egress enforcement on this node's docker provider (DESIGN.md §10). At start: the conditions are
 * checked (when one fails, filtered stays 501 with the reason, logged and shown by `doctor`), and
 * what a killed earlier run of this installation left is cleared — an unused filtered network and
 * the host rules with its tag go; a network with filtered containers still attached keeps them and
 * enforcement comes up at once. Otherwise nothing is made until the first filtered spawn, which
 * makes the network, then the host firewall, the refusing DNS server and the gateway, in that
 * order. Loaded only when a docker provider runs here: in `serve` (rules from the store) and in
 * `worker` (rules the control plane sent with the spawn and each PUT, kept in the worker's state).
 */
export async function startEgress(deps: EgressDeps): Promise<EgressHandle | null> {
  const docker = deps.providers.find((p) => p.name === 'docker');
  const { DockerEgress } = await import('../adapters/providers/docker/egress.js');
  const egress = docker?.egress;
  if (!(egress instanceof DockerEgress)) return null;
  const log = deps.logger;
  const port = deps.config.providers.docker.egress_port;
  const unavailable = (reason: string): EgressHandle => {
    egress.disable(reason);
    log.info(`network "filtered" is not available: ${reason}`);
    return { reason, close: async () => undefined };
  };
  const why = await egress.check();
  if (why !== null) return unavailable(why);
  // DESIGN §15: the node's CA (sandboxes trust it through a mounted bundle) and the upstream trust.
  let interception: Awaited<ReturnType<typeof loadInterception>>;
  try {
    interception = await loadInterception(deps.config, deps.home ?? homedir());
  } catch (err) {
    return unavailable(`the egress CA could not be loaded: ${(err as Error).message}`);
  }
  await egress.trust(interception.caPem, join(interception.dir, 'bundles'));
  const { Firewall, removeTaggedRules } = await import('../transports/egress/firewall.js');
  const { DnsRefuser } = await import('../transports/egress/dns-refuser.js');
  const { EgressGateway } = await import('../transports/egress/gateway.js');
  const tag = egress.names.ruleTag;
  let running: { gateway: InstanceType<typeof EgressGateway>; dns: InstanceType<typeof DnsRefuser> } | null = null;

  const starter = async (net: FilteredNetwork) => {
    const gateway = new EgressGateway({
      host: net.gateway,
      port,
      sandboxFor: (address) => egress.sandboxFor(address),
      rules: deps.rules,
      ...(deps.secrets ? { secrets: deps.secrets } : {}),
      ownAddresses,
      ...(deps.resolve ? { resolve: deps.resolve } : {}),
      ...(deps.secrets ? { secrets: deps.secrets } : {}),
      interception: interception.tls,
      onInjection: (id) => deps.onInjection?.(id),
      onNotice: (id, line) => egress.consoleLine(id, line),
      onVerdict: (v) => {
        deps.onVerdict?.(v);
        // A console-log line per denial, in the sandbox's own console.
        if (v.verdict === 'denied' && v.sandbox_id)
          egress.consoleLine(v.sandbox_id, `sbx egress: denied ${v.host}:${v.port} (${v.reason})`);
      },
    });
    const dns = new DnsRefuser(net.gateway);
    try {
      await new Firewall({ subnet: net.subnet, gateway: net.gateway, port, tag }).install();
      await dns.start();
      await gateway.start();
    } catch (err) {
      // The host rules stay (they only deny); an unused network and its rules go at shutdown.
      await gateway.close().catch(() => undefined);
      await dns.close().catch(() => undefined);
      const reason = `the egress gateway could not start on ${net.gateway}:${port}: ${(err as Error).message}`;
      log.warn(`network "filtered" is not available: ${reason}`);
      throw new Error(reason);
    }
    running = { gateway, dns };
    log.info({ network: net.name, gateway: `${net.gateway}:${port}` }, 'egress gateway for filtered sandboxes is listening');
  };

  let leftovers: Awaited<ReturnType<typeof egress.clearLeftovers>>;
  try {
    leftovers = await egress.clearLeftovers();
    if (leftovers !== 'in_use') await removeTaggedRules(tag);
  } catch (err) {
    return unavailable(`could not clear what an earlier run left of the filtered network: ${(err as Error).message}`);
  }
  if (leftovers === 'removed') log.info({ network: egress.names.network }, 'removed the filtered network an earlier run left');
  egress.arm(port, starter, (id) => void running?.gateway.changed(id));
  // Filtered containers outlived an earlier run: their gateway comes up now (its rules are re-checked, never duplicated).
  if (leftovers === 'in_use') await egress.up().catch(() => undefined);
  return {
    reason: null,
    async close() {
      egress.disable('the egress gateway stopped');
      await egress.settled();
      await running?.gateway.close().catch(() => undefined);
      await running?.dns.close().catch(() => undefined);
      // Filtered containers outlive the server: while any is attached, the host rules stay (fail
      // closed; the next start finds them in place). With none left, network and rules go.
      const gone = await egress.removeNetworkIfUnused();
      if (gone) await removeTaggedRules(tag).catch(() => undefined);
      else
        log.info(
          { network: egress.names.network },
          'filtered sandboxes remain: their network and host firewall rules are kept until they are gone',
        );
    },
  };
}
