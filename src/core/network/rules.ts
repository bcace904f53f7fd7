import { badRequest } from '../errors.js';
import {
  cidrContains,
  cidrWithin,
  formatCidr,
  judgedForms,
  parseCidr,
  parseIPv4,
  parseIPv6,
  SPECIAL_RANGES,
  type Cidr,
  type Ip,
} from './ip.js';

/**
 * Egress rules (DESIGN.md §10): parse, canonicalise, judge. Pure — the gateway does the I/O.
 *
 * A rule is a host name, `*.name` (subdomains at any depth, not the name itself), or an IPv4/IPv6
 * address or CIDR, with an optional port: `pypi.org:443`, `[2001:db8::1]:443`, `10.0.0.0/8:5432`.
 * An IPv6 rule with a port is bracketed; an unbracketed IPv6 is always the whole address.
 */
export type Rule =
  | { kind: 'name'; name: string; port: number | null; text: string }
  | { kind: 'wildcard'; suffix: string; port: number | null; text: string }
  | { kind: 'cidr'; cidr: Cidr; port: number | null; text: string };

export interface EgressLists {
  allow: string[];
  deny: string[];
}

export interface ParsedLists {
  allow: Rule[];
  deny: Rule[];
}

export const MAX_RULES = 64;
export const MAX_RULE_CHARS = 253;

/**
 * Why the gateway refused; `secret_not_allowed`: a secret's placeholder bound for a host outside its
 * secret's hosts, or not this sandbox's (DESIGN §15).
 */
export type DenyReason = 'no_rule' | 'deny_rule' | 'special_address' | 'sni_mismatch' | 'dns_failed' | 'limit' | 'secret_not_allowed';

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * A host name in canonical form — lower-case, one trailing dot stripped, IDNA A-labels — or null
 * when it is not a name (empty labels, forbidden characters, over 253 chars, or a last label that
 * is numeric: `2130706433`, `127.1` and `0x7f.0.0.1` are neither names nor addresses).
 */
export function canonicalName(input: string): string | null {
  let name = input.endsWith('.') ? input.slice(0, -1) : input;
  if (name === '' || name.length > MAX_RULE_CHARS) return null;
  // Only what a host name may hold reaches the URL parser: it would decode %xx, read numbers as IPv4.
  if (/[\s/\\?#@:%[\]<>^|"'`{}!$&()*+,;=~]/.test(name)) return null;
  if (/[^\x21-\x7e]/.test(name)) {
    let host: string;
    try {
      host = new URL(`http://${name}/`).hostname;
    } catch {
      return null;
    }
    name = host;
  }
  name = name.toLowerCase();
  if (name.length > MAX_RULE_CHARS) return null;
  const labels = name.split('.');
  if (!labels.every((l) => LABEL.test(l))) return null;
  const last = labels[labels.length - 1]!;
  if (/^[0-9]+$/.test(last) || /^0x[0-9a-f]*$/.test(last)) return null;
  return name;
}

function parsePort(text: string, rule: string): number {
  if (!/^[1-9][0-9]{0,4}$/.test(text) || Number(text) > 65535)
    throw badRequest(`egress rule ${JSON.stringify(rule)}: bad port ${JSON.stringify(text)} (1-65535)`);
  return Number(text);
}

/** One rule, canonicalised; a bad rule → 400 naming it. */
export function parseRule(raw: unknown): Rule {
  if (typeof raw !== 'string') throw badRequest('egress rules must be strings');
  const rule = raw;
  const bad = (why: string) => badRequest(`egress rule ${JSON.stringify(rule)}: ${why}`);
  if (rule.trim() === '') throw badRequest('egress rule is empty');
  if (rule.length > MAX_RULE_CHARS) throw bad(`longer than ${MAX_RULE_CHARS} characters`);
  let host = rule;
  let port: number | null = null;
  if (rule.startsWith('[')) {
    const close = rule.indexOf(']');
    if (close < 0) throw bad('unclosed [');
    host = rule.slice(1, close);
    const rest = rule.slice(close + 1);
    if (rest !== '') {
      if (!rest.startsWith(':')) throw bad('expected :port after ]');
      port = parsePort(rest.slice(1), rule);
    }
    if (!host.includes(':')) throw bad('only IPv6 addresses go in brackets');
    const cidr = parseCidr(host);
    if (!cidr || cidr.ip.family !== 6) throw bad('not an IPv6 address or CIDR (host bits must be zero)');
    return cidrRule(cidr, port);
  }
  const colons = (rule.match(/:/g) ?? []).length;
  if (colons > 1) {
    // An unbracketed IPv6 is the whole address: a port needs [addr]:port.
    const cidr = parseCidr(rule);
    if (!cidr || cidr.ip.family !== 6) throw bad('not an IPv6 address or CIDR; an IPv6 rule with a port is written [addr]:port');
    return cidrRule(cidr, null);
  }
  if (colons === 1) {
    const at = rule.lastIndexOf(':');
    host = rule.slice(0, at);
    port = parsePort(rule.slice(at + 1), rule);
  }
  if (host.includes('/')) {
    const cidr = parseCidr(host);
    if (!cidr || cidr.ip.family !== 4) throw bad('bad CIDR (an IPv4 network with its host bits zero, prefix 0-32)');
    return cidrRule(cidr, port);
  }
  if (/^[0-9.]+$/.test(host)) {
    const ip = parseIPv4(host);
    if (!ip) throw bad('not an IPv4 address (four decimal parts 0-255, no leading zeros)');
    return cidrRule({ ip, prefix: 32 }, port);
  }
  if (host.startsWith('*.')) {
    const suffix = host.slice(2);
    if (suffix.includes('*')) throw bad('a wildcard may only be the first label, as in *.example.com');
    const name = canonicalName(suffix);
    if (!name) throw bad('not a host name');
    return { kind: 'wildcard', suffix: name, port, text: `*.${name}${port !== null ? `:${port}` : ''}` };
  }
  if (host.includes('*')) throw bad('a wildcard may only be the first label, as in *.example.com');
  const name = canonicalName(host);
  if (!name) throw bad('not a host name or IP address');
  return { kind: 'name', name, port, text: `${name}${port !== null ? `:${port}` : ''}` };
}

function cidrRule(cidr: Cidr, port: number | null): Rule {
  const body = formatCidr(cidr);
  const hostText = cidr.ip.family === 6 && port !== null ? `[${body}]` : body;
  return { kind: 'cidr', cidr, port, text: `${hostText}${port !== null ? `:${port}` : ''}` };
}

/**
 * Both lists, checked up front: at most 64 rules each, every rule valid; a bad list → 400 naming
 * the rule. Answers the canonical text of each rule, duplicates dropped, order kept.
 */
export function parseEgress(input: unknown): EgressLists {
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw badRequest('egress must be an object {allow, deny}');
  const obj = input as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (key !== 'allow' && key !== 'deny') throw badRequest(`egress has no field ${JSON.stringify(key)} (allow, deny)`);
  }
  const list = (key: 'allow' | 'deny'): string[] => {
    const v = obj[key];
    if (v === undefined) return [];
    if (!Array.isArray(v)) throw badRequest(`egress.${key} must be an array of rules`);
    if (v.length > MAX_RULES) throw badRequest(`egress.${key} has ${v.length} rules; at most ${MAX_RULES}`);
    const out: string[] = [];
    for (const r of v) {
      const text = parseRule(r).text;
      if (!out.includes(text)) out.push(text);
    }
    return out;
  };
  return { allow: list('allow'), deny: list('deny') };
}

/** Stored lists (already canonical) to rules; an unreadable rule is dropped from allow and kept out. */
export function compileLists(lists: EgressLists): ParsedLists {
  const compile = (xs: string[]) =>
    xs.flatMap((x) => {
      try {
        return [parseRule(x)];
      } catch {
        return [];
      }
    });
  return { allow: compile(lists.allow), deny: compile(lists.deny) };
}

/** What a client asked for: a canonical name or an IP literal. */
export type Target = { kind: 'name'; name: string } | { kind: 'ip'; ip: Ip };

/**
 * The host of a proxy request or CONNECT line, strictly: a bracketed IPv6, a dotted-quad IPv4, or
 * a name. Null when it is none of them (then the gateway answers 400).
 */
export function parseTarget(host: string): Target | null {
  if (host.startsWith('[')) {
    if (!host.endsWith(']')) return null;
    const ip = parseIPv6(host.slice(1, -1));
    return ip ? { kind: 'ip', ip } : null;
  }
  if (host.includes(':')) {
    const ip = parseIPv6(host);
    return ip ? { kind: 'ip', ip } : null;
  }
  if (/^[0-9.]+$/.test(host)) {
    const ip = parseIPv4(host);
    return ip ? { kind: 'ip', ip } : null;
  }
  const name = canonicalName(host);
  return name ? { kind: 'name', name } : null;
}

function portMatches(rule: Rule, port: number): boolean {
  return rule.port === null || rule.port === port;
}

function nameMatches(rule: Rule, name: string): boolean {
  if (rule.kind === 'name') return rule.name === name;
  if (rule.kind === 'wildcard') return name.endsWith(`.${rule.suffix}`);
  return false;
}

function ipMatches(rule: Rule, ip: Ip): boolean {
  return rule.kind === 'cidr' && judgedForms(ip).some((f) => cidrContains(rule.cidr, f));
}

/** Whether one rule names host:port (a name by name or wildcard rules, an address by CIDR rules); no special-range logic. */
export function ruleMatches(rule: Rule, target: Target, port: number): boolean {
  if (!portMatches(rule, port)) return false;
  return target.kind === 'name' ? nameMatches(rule, target.name) : ipMatches(rule, target.ip);
}

export type Verdict = { verdict: 'allowed'; rule: Rule } | { verdict: 'denied'; reason: DenyReason };

/**
 * Special address: one of §10's ranges or the node's own addresses, in any of its forms (the
 * IPv4 inside an IPv6 too). Such an address passes only through an allow rule whose CIDR lies
 * entirely inside the special range it falls in (and contains it): `0.0.0.0/0` opens none.
 */
function specialOpened(ip: Ip, port: number, allow: Rule[], own: readonly Ip[]): 'not_special' | 'opened' | 'closed' {
  const ranges: Cidr[] = [];
  for (const f of judgedForms(ip)) {
    for (const r of SPECIAL_RANGES) if (cidrContains(r, f)) ranges.push(r);
    for (const o of own) {
      if (o.family === f.family && cidrContains({ ip: o, prefix: o.bytes.length * 8 }, f))
        ranges.push({ ip: o, prefix: o.bytes.length * 8 });
    }
  }
  if (ranges.length === 0) return 'not_special';
  const opened = ranges.every((range) =>
    allow.some(
      (rule) =>
        rule.kind === 'cidr' &&
        portMatches(rule, port) &&
        cidrWithin(rule.cidr, range) &&
        judgedForms(ip).some((f) => cidrContains(rule.cidr, f)),
    ),
  );
  return opened ? 'opened' : 'closed';
}

/**
 * The verdict on one address a connection would go to: deny rules, then special ranges, then
 * allow rules, else `no_rule`. `viaName` is the allow rule that admitted the name it was resolved
 * from (a resolved address needs no IP rule of its own, but deny and special still apply).
 */
export function judgeAddress(ip: Ip, port: number, lists: ParsedLists, own: readonly Ip[], viaName?: Rule): Verdict {
  if (lists.deny.some((r) => portMatches(r, port) && ipMatches(r, ip))) return { verdict: 'denied', reason: 'deny_rule' };
  const special = specialOpened(ip, port, lists.allow, own);
  if (special === 'closed') return { verdict: 'denied', reason: 'special_address' };
  const rule = lists.allow.find((r) => portMatches(r, port) && ipMatches(r, ip));
  if (rule) return { verdict: 'allowed', rule };
  if (viaName && special === 'not_special') return { verdict: 'allowed', rule: viaName };
  return { verdict: 'denied', reason: 'no_rule' };
}

/**
 * The verdict on a name before it is resolved: deny rules, then allow rules, else `no_rule`. A
 * name is allowed only by a name or wildcard rule (an IP rule never admits a name); every address
 * it resolves to must then pass `judgeAddress`.
 */
export function judgeName(name: string, port: number, lists: ParsedLists): Verdict {
  if (lists.deny.some((r) => portMatches(r, port) && nameMatches(r, name))) return { verdict: 'denied', reason: 'deny_rule' };
  const rule = lists.allow.find((r) => portMatches(r, port) && nameMatches(r, name));
  return rule ? { verdict: 'allowed', rule } : { verdict: 'denied', reason: 'no_rule' };
}

/**
 * The addresses a name resolved to that pass, in order — the gateway connects to them and to no
 * other, with no second lookup. None pass → denied with the reason of the first refusal
 * (`dns_failed` when there were none).
 */
export function passingAddresses(
  addresses: readonly Ip[],
  port: number,
  lists: ParsedLists,
  own: readonly Ip[],
  viaName: Rule,
): { passing: Ip[]; reason: DenyReason } {
  const passing: Ip[] = [];
  let reason: DenyReason = 'dns_failed';
  for (const ip of addresses) {
    const v = judgeAddress(ip, port, lists, own, viaName);
    if (v.verdict === 'allowed') passing.push(ip);
    else if (reason === 'dns_failed') reason = v.reason;
  }
  return { passing, reason };
}

/** The node's own addresses as IPs (unparseable ones are skipped). */
export function ownAddresses(texts: readonly string[]): Ip[] {
  return texts.flatMap((t) => {
    const ip = t.includes(':') ? parseIPv6(t.replace(/%.*$/, '')) : parseIPv4(t);
    return ip ? [ip] : [];
  });
}
