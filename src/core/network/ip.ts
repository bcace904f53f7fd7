/**
 * Strict IP literals for egress rules (DESIGN.md §10). Pure: no node: modules.
 *
 * An address is its bytes (4 for IPv4, 16 for IPv6). IPv4 is only the dotted-quad form with four
 * decimal parts 0–255 and no leading zeros: `2130706433`, `0x7f.1`, `0177.0.0.1` and `127.1` are
 * not addresses (and not names either: see `canonicalName`).
 */
export interface Ip {
  family: 4 | 6;
  bytes: readonly number[];
}

export interface Cidr {
  ip: Ip;
  prefix: number;
}

const V4_PART = /^(0|[1-9][0-9]{0,2})$/;

export function parseIPv4(text: string): Ip | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  const bytes: number[] = [];
  for (const p of parts) {
    if (!V4_PART.test(p)) return null;
    const n = Number(p);
    if (n > 255) return null;
    bytes.push(n);
  }
  return { family: 4, bytes };
}

const V6_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** RFC 4291 text forms, with an optional trailing dotted quad; no zone ids, no brackets. */
export function parseIPv6(text: string): Ip | null {
  if (text.length === 0 || text.length > 45 || text.includes('%')) return null;
  let tail: number[] = [];
  let body = text;
  const lastColon = text.lastIndexOf(':');
  if (lastColon < 0) return null;
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    const v4 = parseIPv4(last);
    if (!v4) return null;
    tail = [...v4.bytes];
    // The dotted quad stands for the last two groups.
    body = text.slice(0, lastColon + 1) + 'ffff:ffff';
  }
  const halves = body.split('::');
  if (halves.length > 2) return null;
  const toGroups = (s: string): number[] | null => {
    if (s === '') return [];
    const gs = s.split(':');
    const out: number[] = [];
    for (const g of gs) {
      if (!V6_GROUP.test(g)) return null;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const head = toGroups(halves[0]!);
  if (!head) return null;
  let groups: number[];
  if (halves.length === 2) {
    const rest = toGroups(halves[1]!);
    if (!rest) return null;
    const missing = 8 - head.length - rest.length;
    if (missing < 1) return null;
    groups = [...head, ...new Array<number>(missing).fill(0), ...rest];
  } else {
    if (head.length !== 8) return null;
    groups = head;
  }
  const bytes: number[] = [];
  for (const g of groups) bytes.push(g >> 8, g & 0xff);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return { family: 6, bytes };
}

export function parseIp(text: string): Ip | null {
  return text.includes(':') ? parseIPv6(text) : parseIPv4(text);
}

/** `addr/len` with the host bits zero (`10.0.0.1/8` is refused: it is not what it says). */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  if (slash < 0) {
    const ip = parseIp(text);
    return ip ? { ip, prefix: ip.bytes.length * 8 } : null;
  }
  const ip = parseIp(text.slice(0, slash));
  const len = text.slice(slash + 1);
  if (!ip || !/^(0|[1-9][0-9]{0,2})$/.test(len)) return null;
  const prefix = Number(len);
  if (prefix > ip.bytes.length * 8) return null;
  for (let bit = prefix; bit < ip.bytes.length * 8; bit++) {
    if (bitAt(ip.bytes, bit)) return null;
  }
  return { ip, prefix };
}

function bitAt(bytes: readonly number[], bit: number): number {
  return (bytes[bit >> 3]! >> (7 - (bit & 7))) & 1;
}

export function cidrContains(c: Cidr, ip: Ip): boolean {
  if (c.ip.family !== ip.family) return false;
  for (let bit = 0; bit < c.prefix; bit++) {
    if (bitAt(c.ip.bytes, bit) !== bitAt(ip.bytes, bit)) return false;
  }
  return true;
}

/** True when every address of `inner` lies in `outer`. */
export function cidrWithin(inner: Cidr, outer: Cidr): boolean {
  return inner.ip.family === outer.ip.family && inner.prefix >= outer.prefix && cidrContains(outer, inner.ip);
}

function v4(bytes: readonly number[]): Ip {
  return { family: 4, bytes: [...bytes] };
}

function zeros(bytes: readonly number[], from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (bytes[i] !== 0) return false;
  return true;
}

/**
 * The IPv4 address inside an IPv6 one, if any: mapped `::ffff:a.b.c.d`, translated
 * `::ffff:0:a.b.c.d`, compatible `::a.b.c.d` (not `::` or `::1`), NAT64 `64:ff9b::/96` and
 * `64:ff9b:1::/48`, 6to4 `2002:AABB:CCDD::/16`.
 */
export function embeddedIPv4(ip: Ip): Ip | null {
  if (ip.family !== 6) return null;
  const b = ip.bytes;
  if (zeros(b, 0, 10) && b[10] === 0xff && b[11] === 0xff) return v4(b.slice(12));
  if (zeros(b, 0, 8) && b[8] === 0xff && b[9] === 0xff && b[10] === 0 && b[11] === 0) return v4(b.slice(12));
  if (zeros(b, 0, 12) && !zeros(b, 12, 15)) return v4(b.slice(12));
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b) {
    if (zeros(b, 4, 12)) return v4(b.slice(12));
    if (b[4] === 0 && b[5] === 1) return v4(b.slice(12));
  }
  if (b[0] === 0x20 && b[1] === 0x02) return v4(b.slice(2, 6));
  return null;
}

/** The forms an address is judged in: itself, then the IPv4 address inside it. */
export function judgedForms(ip: Ip): Ip[] {
  const inner = embeddedIPv4(ip);
  return inner ? [ip, inner] : [ip];
}

export function formatIp(ip: Ip): string {
  if (ip.family === 4) return ip.bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push((ip.bytes[i]! << 8) | ip.bytes[i + 1]!);
  // The longest run of two or more zero groups becomes '::' (RFC 5952).
  let bestAt = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestAt = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestAt < 0) return hex.join(':');
  return `${hex.slice(0, bestAt).join(':')}::${hex.slice(bestAt + bestLen).join(':')}`;
}

export function formatCidr(c: Cidr): string {
  return c.prefix === c.ip.bytes.length * 8 ? formatIp(c.ip) : `${formatIp(c.ip)}/${c.prefix}`;
}

/** Special ranges of DESIGN.md §10, refused unless an allow rule's CIDR lies entirely inside one. */
export const SPECIAL_RANGES: readonly Cidr[] = [
  '0.0.0.0/8',
  '127.0.0.0/8',
  '10.0.0.0/8',
  '172.16.0.0/12',
  '192.168.0.0/16',
  '100.64.0.0/10',
  '169.254.0.0/16',
  '224.0.0.0/4',
  '240.0.0.0/4',
  '::/128',
  '::1/128',
  'fc00::/7',
  'fe80::/10',
  'ff00::/8',
].map((s) => parseCidr(s)!);
