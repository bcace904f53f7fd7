import { createServer } from 'node:net';
import type Docker from 'dockerode';
import { SbxError } from '../../../core/errors.js';
import type { ProviderEgress } from '../../../core/ports/index.js';
import { LABEL_INSTALLATION as CONTAINER_INSTALLATION } from './containers.js';
import { isNotFound } from './errors.js';
import type { ResolvedOptions } from './options.js';
import { CA_BUNDLE_PATH, CA_VARS, TrustBundles } from './trust-bundle.js';

/** The proxy variables of a filtered sandbox (DESIGN.md §10). */
const PROXY_VARS = ['HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy', 'NO_PROXY', 'no_proxy'] as const;
/** Every variable sbx sets in a filtered sandbox's container: never carried into a snapshot or fork image (§15). */
export const FILTERED_ENV_VARS: readonly string[] = [...PROXY_VARS, ...CA_VARS];

/** Label on the filtered network: which installation made it. */
const LABEL_INSTALLATION = 'sbx.installation';
/** Capabilities that would let a sandbox forge packets or change its own routes. */
const FORBIDDEN_CAPS = ['NET_RAW', 'NET_ADMIN', 'CAP_NET_RAW', 'CAP_NET_ADMIN', 'ALL'];

/** The sbx-created internal bridge network filtered sandboxes join (DESIGN.md §10). */
export interface FilteredNetwork {
  name: string;
  /** The network's gateway address: the host end of its bridge, where the egress gateway listens. */
  gateway: string;
  /** Its IPv4 subnet (CIDR). */
  subnet: string;
}

/** What a filtered container gets besides the network: DNS at the gateway, the proxy and CA variables, the trust bundle. */
export interface FilteredCreate {
  networkMode: string;
  dns: string[];
  env: string[];
  /** The trust bundle's read-only bind mount (DESIGN §15), when the node has a CA. */
  mounts: Docker.MountSettings[];
  /** Run on the created container before it starts (fills the bundle from the image). */
  prepare?(containerId: string, signal?: AbortSignal): Promise<void>;
}

/** What sbx names on this host for filtered sandboxes: the docker network and the comment on its host firewall rules. */
export interface FilteredNames {
  network: string;
  /** The comment every host INPUT rule of that network carries (`iptables -m comment`): how a start finds a killed run's rules. */
  ruleTag: string;
}

/** Whose filtered network it is. The one place for the naming, so a narrower scope (e.g. a worker id) extends network and rules alike. */
export interface FilteredScope {
  installationId: string;
}

export function filteredNames(scope: FilteredScope): FilteredNames {
  const network = `sbx-filtered-${scope.installationId.replace(/[^A-Za-z0-9_.-]/g, '').slice(0, 24)}`;
  return { network, ruleTag: `sbx-egress:${network}` };
}

export function filteredNetworkName(installationId: string): string {
  return filteredNames({ installationId }).network;
}

/** Brings enforcement up on the network (compose: host firewall, refusing DNS, gateway); throws with the reason. */
export type EgressStarter = (net: FilteredNetwork) => Promise<void>;

/** What a start finds of an earlier run (DESIGN.md §10): nothing, a network still in use, or an unused one it removed. */
export type Leftovers = 'none' | 'in_use' | 'removed';

/**
 * Egress enforcement on docker (DESIGN.md §10). `check` tests the conditions — sbx runs as root,
 * the engine is local (unix socket) and rootful with its bridge in sbx's network namespace, no
 * NET_RAW/NET_ADMIN added. Compose then clears what a killed earlier run left and `arm`s it with a
 * starter; the first filtered spawn makes the internal network (inter-container traffic off) and
 * runs the starter (host firewall, gateway), once. Until armed, and whenever a condition fails,
 * `unavailable()` says why and filtered spawns get 501.
 */
export class DockerEgress implements ProviderEgress {
  private reason: string | null = 'the egress gateway is not running (it starts with `sbx serve`)';
  private net: FilteredNetwork | null = null;
  private port = 3128;
  private starter: EgressStarter | null = null;
  private starting: Promise<FilteredNetwork> | null = null;
  private onChanged: (sandboxId: string) => void = () => {};
  /** Source address → sandbox id, from the network's containers; refreshed on a miss. */
  private sources = new Map<string, string>();
  /** Sandbox id → container id, from the same reading. */
  private containerOf = new Map<string, string>();
  /** Appends a line to a runtime's console (index.ts wires the docker console). */
  onConsole: (runtimeId: string, line: string) => void = () => {};
  private sourcesAt = 0;
  private bundles: TrustBundles | null = null;
  private refreshing: Promise<void> | null = null;
  readonly names: FilteredNames;

  constructor(
    private readonly docker: Docker,
    private readonly opts: ResolvedOptions,
  ) {
    this.names = filteredNames({ installationId: opts.installationId });
  }

  unavailable(): string | null {
    return this.reason;
  }

  changed(sandboxId: string): void {
    this.onChanged(sandboxId);
  }

  /** The network once enforcement is up (from the first filtered spawn on), else null. */
  get network(): FilteredNetwork | null {
    return this.net;
  }

  /** Why filtered cannot be enforced here, or null when it can (nothing is created). */
  async check(signal?: AbortSignal): Promise<string | null> {
    if (typeof process.getuid === 'function' && process.getuid() !== 0)
      return 'sbx does not run as root (it installs host firewall rules for the filtered network)';
    if (this.opts.endpoint.kind !== 'unix')
      return `the docker engine is not local (${this.opts.endpoint.description}): its bridge is not on this host`;
    const caps = this.opts.addedCaps.map((c) => c.toUpperCase());
    const bad = caps.find((c) => FORBIDDEN_CAPS.includes(c));
    if (bad) return `providers.docker.added_caps adds ${bad}, which would let a filtered sandbox forge packets`;
    let info: { SecurityOptions?: string[] };
    try {
      info = (await this.docker.info({ abortSignal: signal } as never)) as unknown as { SecurityOptions?: string[] };
    } catch {
      return 'the docker engine did not answer';
    }
    if ((info.SecurityOptions ?? []).some((o) => /name=rootless/.test(o)))
      return "the docker engine is rootless: its bridge is not in sbx's network namespace";
    return null;
  }

  /**
   * What an earlier run of this installation left: its network with containers still attached
   * (`in_use`: they are live, enforcement must come up now), or an unused one, which goes
   * (`removed`; compose removes its host rules by their tag whenever the network is not in use).
   */
  async clearLeftovers(): Promise<Leftovers> {
    const network = this.docker.getNetwork(this.names.network);
    let inspect: Docker.NetworkInspectInfo;
    try {
      inspect = (await network.inspect()) as Docker.NetworkInspectInfo;
    } catch (err) {
      if (isNotFound(err)) return 'none';
      throw err;
    }
    if (Object.keys(inspect.Containers ?? {}).length > 0) return 'in_use';
    try {
      await network.remove();
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    return 'removed';
  }

  /** Finds or creates the internal network with inter-container traffic off; a string says why not. */
  private async makeNetwork(): Promise<FilteredNetwork | string> {
    const name = this.names.network;
    let inspect: Docker.NetworkInspectInfo;
    try {
      inspect = (await this.docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
    } catch {
      try {
        await this.docker.createNetwork({
          Name: name,
          Driver: 'bridge',
          Internal: true,
          CheckDuplicate: true,
          Options: { 'com.docker.network.bridge.enable_icc': 'false' },
          Labels: { [LABEL_INSTALLATION]: this.opts.installationId },
        });
        inspect = (await this.docker.getNetwork(name).inspect()) as Docker.NetworkInspectInfo;
      } catch (err) {
        return `could not create the docker network ${name}: ${(err as Error).message}`;
      }
    }
    if (!inspect.Internal || inspect.Options?.['com.docker.network.bridge.enable_icc'] !== 'false' || inspect.Driver !== 'bridge') {
      return `the docker network ${name} exists but is not an internal bridge with inter-container traffic off`;
    }
    const cfg = inspect.IPAM?.Config?.find((c) => c.Subnet && !c.Subnet.includes(':') && c.Gateway);
    if (!cfg?.Subnet || !cfg.Gateway) return `the docker network ${name} has no IPv4 subnet and gateway`;
    const gateway = cfg.Gateway.replace(/\/.*$/, '');
    if (!(await bindable(gateway))) return `the docker bridge of ${name} (${gateway}) is not in sbx's network namespace`;
    return { name, gateway, subnet: cfg.Subnet };
  }

  /** Filtered spawns are accepted from now on: the first brings enforcement up with `starter`; `onChanged` hears of PUTs. */
  arm(port: number, starter: EgressStarter, onChanged: (sandboxId: string) => void): void {
    this.port = port;
    this.starter = starter;
    this.onChanged = onChanged;
    this.reason = null;
  }

  /**
   * The network with its firewall and gateway up: made once (concurrent callers share the
   * attempt); a failure is 501 with the reason, and the next filtered spawn tries again.
   */
  async up(): Promise<FilteredNetwork> {
    const starter = this.starter;
    if (this.reason !== null || !starter) throw new SbxError('not_implemented', `network "filtered" is not available here: ${this.reason}`);
    if (this.net) return this.net;
    this.starting ??= (async () => {
      const net = await this.makeNetwork();
      if (typeof net === 'string') throw new Error(net);
      await starter(net);
      this.net = net;
      return net;
    })().finally(() => {
      this.starting = null;
    });
    try {
      return await this.starting;
    } catch (err) {
      throw new SbxError('not_implemented', `network "filtered" is not available here: ${(err as Error).message}`);
    }
  }

  /** Resolves once no bring-up is in flight (shutdown waits for one, so nothing it starts outlives the stop). */
  async settled(): Promise<void> {
    await this.starting?.catch(() => undefined);
  }

  disable(reason: string): void {
    this.reason = reason;
    this.onChanged = () => {};
  }

  /**
   * The node's CA (DESIGN §15): from now on each filtered container gets a trust bundle (its
   * image's CAs and this one) mounted read-only, and the CA variables point at it. Bundles of
   * sandboxes whose container is gone are removed.
   */
  async trust(caPem: string, dir: string): Promise<void> {
    this.bundles = new TrustBundles(this.docker, caPem, dir);
    try {
      const live = await this.docker.listContainers({
        all: true,
        filters: { label: [`${CONTAINER_INSTALLATION}=${this.opts.installationId}`] },
      });
      const ids = live.flatMap((c) => (c.Names ?? []).map((n) => n.replace(/^\/sbx-/, '')));
      await this.bundles.sweep(new Set(ids));
    } catch {
      // The engine did not answer: nothing is removed now.
    }
  }

  /** A destroyed container's trust bundle goes. */
  async forgetBundle(containerId: string): Promise<void> {
    await this.bundles?.forget(containerId).catch(() => undefined);
  }

  /** Create options of a filtered container, enforcement brought up first; 501 when it cannot be. */
  async createOptions(sandboxId: string): Promise<FilteredCreate> {
    const net = await this.up();
    const proxy = `http://${net.gateway}:${this.port}`;
    const env = PROXY_VARS.map((v) => `${v}=${v.toLowerCase() === 'no_proxy' ? 'localhost,127.0.0.1' : proxy}`);
    const bundles = this.bundles;
    if (!bundles) return { networkMode: net.name, dns: [net.gateway], env, mounts: [] };
    const path = await bundles.make(sandboxId);
    env.push(...CA_VARS.map((v) => `${v}=${CA_BUNDLE_PATH}`));
    return {
      networkMode: net.name,
      dns: [net.gateway],
      env,
      mounts: [{ Type: 'bind', Source: path, Target: CA_BUNDLE_PATH, ReadOnly: true }],
      prepare: (containerId, signal) => bundles.fill(path, containerId, signal),
    };
  }

  /** Spawns and destroys change who holds which address: the next lookup reads the network again. */
  forgetSources(): void {
    this.sourcesAt = 0;
  }

  /**
   * The sandbox a source address on the filtered network belongs to, or null (unknown sources are
   * denied). Read from the network's containers (names `sbx-<sandbox id>`), at most once per 500 ms.
   */
  async sandboxFor(address: string): Promise<string | null> {
    const hit = this.sources.get(address);
    if (hit && Date.now() - this.sourcesAt < 5_000) return hit;
    if (Date.now() - this.sourcesAt >= 500) {
      this.refreshing ??= this.readSources().finally(() => {
        this.refreshing = null;
      });
      await this.refreshing;
    }
    return this.sources.get(address) ?? null;
  }

  private async readSources(): Promise<void> {
    if (!this.net) return;
    const next = new Map<string, string>();
    const containers = new Map<string, string>();
    try {
      const inspect = (await this.docker.getNetwork(this.net.name).inspect()) as Docker.NetworkInspectInfo;
      for (const [containerId, c] of Object.entries(inspect.Containers ?? {})) {
        const ip = (c.IPv4Address ?? '').replace(/\/.*$/, '');
        const name = c.Name ?? '';
        if (ip && name.startsWith('sbx-')) {
          next.set(ip, name.slice(4));
          containers.set(name.slice(4), containerId);
        }
      }
    } catch {
      // The engine did not answer: no source is known, so every connection is denied.
    }
    this.sources = next;
    this.containerOf = containers;
    this.sourcesAt = Date.now();
  }

  /** A line in a filtered sandbox's console (a denial), when its container is known. */
  consoleLine(sandboxId: string, line: string): void {
    const runtimeId = this.containerOf.get(sandboxId);
    if (runtimeId) this.onConsole(runtimeId, line);
  }

  /**
   * Removes the network when nothing is attached (shutdown); a network in use stays. True when
   * it is gone (then its host rules may go too; while filtered containers live they must stay).
   */
  async removeNetworkIfUnused(): Promise<boolean> {
    const network = this.docker.getNetwork(this.names.network);
    try {
      const inspect = (await network.inspect()) as Docker.NetworkInspectInfo;
      if (Object.keys(inspect.Containers ?? {}).length > 0) return false;
      await network.remove();
      return true;
    } catch (err) {
      return isNotFound(err);
    }
  }
}

/**
 * True when this process can listen on `address`: it is an address of sbx's network namespace (a bridge
 * without ports is down, so interface listings miss it).
 */
function bindable(address: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(0, address, () => probe.close(() => resolve(true)));
  });
}
