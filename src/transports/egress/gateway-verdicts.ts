/**
 * The gateway's verdicts (DESIGN.md §10): a sandbox's lists read from the store per connection
 * (cached ≤ 1 s), names resolved by the gateway itself (at most `maxLookups` in flight per sandbox)
 * and judged with core/network, so that only resolved addresses that pass are connected to, in
 * order, with no second lookup; and the judgement again of an open connection when its lists change.
 */
import {
  compileLists,
  judgeAddress,
  judgeName,
  ownAddresses,
  parseTarget,
  passingAddresses,
  type DenyReason,
  type EgressLists,
  type Ip,
  type ParsedLists,
  type Rule,
  type Target,
} from '../../core/network/index.js';

/** An open connection or tunnel as it is judged again. */
export interface Judgeable {
  target: Target;
  port: number;
  address: Ip | null;
  sniChecked: boolean;
}

export type Judged = { ok: true; addresses: Ip[]; rule: Rule } | { ok: false; reason: DenyReason };

export interface VerdictOptions {
  /** A sandbox's current lists; null when it is not (or no longer) filtered: everything denied. */
  rules(sandboxId: string): Promise<EgressLists | null>;
  /** This node's own addresses (special: refused unless an allow CIDR names them). */
  ownAddresses?(): string[];
  resolve(name: string): Promise<string[]>;
  maxLookups: number;
}

const RULES_TTL_MS = 1_000;

export class Verdicts {
  private readonly rulesCache = new Map<string, { at: number; lists: Promise<ParsedLists | null> }>();
  private readonly lookups = new Map<string, number>();

  constructor(private readonly opts: VerdictOptions) {}

  /** The lists changed: the next verdict reads them again. */
  forget(sandboxId: string): void {
    this.rulesCache.delete(sandboxId);
  }

  /** Whether an open connection still passes `lists` (null: the sandbox is not filtered, nothing passes). */
  stillAllowed(o: Judgeable, lists: ParsedLists | null): boolean {
    if (!lists) return false;
    const own = this.own();
    let rule: Rule;
    if (o.target.kind === 'name') {
      const v = judgeName(o.target.name, o.port, lists);
      if (v.verdict === 'denied') return false;
      rule = v.rule;
      if (o.address && judgeAddress(o.address, o.port, lists, own, v.rule).verdict === 'denied') return false;
    } else {
      const v = judgeAddress(o.target.ip, o.port, lists, own);
      if (v.verdict === 'denied') return false;
      rule = v.rule;
    }
    // A tunnel let through without an SNI check needs a rule that still names its port.
    return o.sniChecked || rule.port !== null;
  }

  lists(sandboxId: string): Promise<ParsedLists | null> {
    const now = Date.now();
    const hit = this.rulesCache.get(sandboxId);
    if (hit && now - hit.at < RULES_TTL_MS) return hit.lists;
    const lists = this.opts.rules(sandboxId).then(
      (l) => (l ? compileLists(l) : null),
      () => null,
    );
    this.rulesCache.set(sandboxId, { at: now, lists });
    if (this.rulesCache.size > 10_000) this.rulesCache.clear();
    return lists;
  }

  /** The verdict on host:port for a sandbox, with the addresses to try in order. */
  async judge(sandboxId: string, target: Target, port: number): Promise<Judged> {
    const lists = await this.lists(sandboxId);
    if (!lists) return { ok: false, reason: 'no_rule' };
    const own = this.own();
    if (target.kind === 'ip') {
      const v = judgeAddress(target.ip, port, lists, own);
      return v.verdict === 'allowed' ? { ok: true, addresses: [target.ip], rule: v.rule } : { ok: false, reason: v.reason };
    }
    const v = judgeName(target.name, port, lists);
    if (v.verdict === 'denied') return { ok: false, reason: v.reason };
    const inFlight = this.lookups.get(sandboxId) ?? 0;
    if (inFlight >= this.opts.maxLookups) return { ok: false, reason: 'limit' };
    this.lookups.set(sandboxId, inFlight + 1);
    let texts: string[];
    try {
      texts = await this.opts.resolve(target.name);
    } catch {
      texts = [];
    } finally {
      const left = (this.lookups.get(sandboxId) ?? 1) - 1;
      if (left <= 0) this.lookups.delete(sandboxId);
      else this.lookups.set(sandboxId, left);
    }
    const ips = texts.flatMap((t) => {
      const p = parseTarget(t.includes(':') ? `[${t}]` : t);
      return p && p.kind === 'ip' ? [p.ip] : [];
    });
    const { passing, reason } = passingAddresses(ips, port, lists, own, v.rule);
    return passing.length > 0 ? { ok: true, addresses: passing, rule: v.rule } : { ok: false, reason };
  }

  private own(): Ip[] {
    return ownAddresses(this.opts.ownAddresses?.() ?? []);
  }
}
