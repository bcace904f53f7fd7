import { networkInterfaces } from 'node:os';
import type { Logger } from 'pino';
import type { SbxConfig } from '../config/index.js';
import type { EgressLists } from '../core/network/rules.js';
import type { Provider, SandboxStore } from '../core/ports.js';
import type { VerdictRecord } from '../transports/egress/gateway.js';

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
  logger: Logger;
  /** Each verdict (metrics, events, console lines). */
  onVerdict?(v: VerdictRecord): void;
  /** Name → addresses for the gateway (tests inject one; default: its own node:dns Resolver). */
  resolve?(name: string): Promise<string[]>;
}

const LIVE = new Set(['running', 'unhealthy', 'error']);

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
 * Egress enforcement on this node's docker provider (DESIGN.md §10): the filtered network, the
 * host firewall, the refusing DNS server and the gateway, in that order; when any of them cannot
 * be had, filtered stays 501 with the reason (logged, and shown by `doctor`). Loaded only when a
 * docker provider runs here: in `serve` (rules from the store) and in `worker` (rules the control
 * plane sent with the spawn and each PUT, kept in the worker's state).
 */
export async function startEgress(deps: EgressDeps): Promise<EgressHandle | null> {
  const docker = deps.providers.find((p) => p.name === 'docker');
  const { DockerEgress } = await import('../adapters/providers/docker/egress.js');
  const egress = docker?.egress;
  if (!(egress instanceof DockerEgress)) return null;
  const log = deps.logger;
  const port = deps.config.providers.docker.egress_port;
  const prep = await egress.prepare();
  if (typeof prep === 'string') {
    egress.disable(prep);
    log.info(`network "filtered" is not available: ${prep}`);
    return { reason: prep, close: async () => undefined };
  }
  const { Firewall } = await import('../transports/egress/firewall.js');
  const { DnsRefuser } = await import('../transports/egress/dns-refuser.js');
  const { EgressGateway } = await import('../transports/egress/gateway.js');
  const firewall = new Firewall({ subnet: prep.subnet, gateway: prep.gateway, port, tag: `sbx-egress:${prep.name}` });
  const dns = new DnsRefuser(prep.gateway);
  const gateway = new EgressGateway({
    host: prep.gateway,
    port,
    sandboxFor: (address) => egress.sandboxFor(address),
    rules: deps.rules,
    ownAddresses,
    ...(deps.resolve ? { resolve: deps.resolve } : {}),
    onVerdict: (v) => {
      deps.onVerdict?.(v);
      // A console-log line per denial, in the sandbox's own console.
      if (v.verdict === 'denied' && v.sandbox_id) egress.consoleLine(v.sandbox_id, `sbx egress: denied ${v.host}:${v.port} (${v.reason})`);
    },
  });
  const stop = async (keepRules = false) => {
    await gateway.close().catch(() => undefined);
    await dns.close().catch(() => undefined);
    if (!keepRules) await firewall.remove().catch(() => undefined);
  };
  try {
    await firewall.install();
    await dns.start();
    await gateway.start();
  } catch (err) {
    await stop();
    const reason = `the egress gateway could not start on ${prep.gateway}:${port}: ${(err as Error).message}`;
    egress.disable(reason);
    log.warn(`network "filtered" is not available: ${reason}`);
    return { reason, close: async () => undefined };
  }
  egress.enable(prep, port, (id) => void gateway.changed(id));
  log.info({ network: prep.name, gateway: `${prep.gateway}:${port}` }, 'egress gateway for filtered sandboxes is listening');
  return {
    reason: null,
    async close() {
      egress.disable('the egress gateway stopped');
      // Filtered containers outlive the server: while any is attached, the host rules stay (fail
      // closed; the next start finds them in place). With none left, network and rules go.
      const gone = await egress.removeNetworkIfUnused();
      await stop(!gone);
      if (!gone)
        log.info({ network: prep.name }, 'filtered sandboxes remain: their network and host firewall rules are kept until they are gone');
    },
  };
}
