import { describe, expect, it } from 'vitest';
import { isSbxError } from '../../src/core/errors.js';
import {
  canonicalName,
  compileLists,
  embeddedIPv4,
  formatIp,
  judgeAddress,
  judgeName,
  ownAddresses,
  parseEgress,
  parseIPv4,
  parseIPv6,
  parseRule,
  parseTarget,
  passingAddresses,
  type Ip,
} from '../../src/core/network/index.js';

const ip = (s: string): Ip => {
  const t = parseTarget(s);
  if (!t || t.kind !== 'ip') throw new Error(`not an ip: ${s}`);
  return t.ip;
};
const lists = (allow: string[], deny: string[] = []) => compileLists(parseEgress({ allow, deny }));

function badRule(rule: unknown): string {
  try {
    parseRule(rule);
  } catch (err) {
    if (isSbxError(err) && err.code === 'bad_request') return err.message;
    throw err;
  }
  throw new Error(`accepted ${JSON.stringify(rule)}`);
}

describe('egress rules: parsing and canonical form', () => {
  it('canonicalises names, wildcards, addresses, CIDRs and ports', () => {
    expect(parseRule('PyPI.org.').text).toBe('pypi.org');
    expect(parseRule('pypi.org:443').text).toBe('pypi.org:443');
    expect(parseRule('*.Example.COM').text).toBe('*.example.com');
    expect(parseRule('bücher.de').text).toBe('xn--bcher-kva.de');
    expect(parseRule('10.0.0.0/8:5432').text).toBe('10.0.0.0/8:5432');
    expect(parseRule('[2001:DB8::1]:443').text).toBe('[2001:db8::1]:443');
    expect(parseRule('2001:db8::/32').text).toBe('2001:db8::/32');
    expect(parseRule('198.18.0.1').text).toBe('198.18.0.1');
    expect(parseRule('[2001:db8::/32]:8443').text).toBe('[2001:db8::/32]:8443');
  });

  it('refuses every bad rule with a message naming it', () => {
    expect(badRule('')).toMatch(/empty/);
    expect(badRule('   ')).toMatch(/empty/);
    expect(badRule(`${'a'.repeat(250)}.com`)).toMatch(/253/);
    for (const r of ['pypi.org:0', 'pypi.org:65536', 'pypi.org:', 'pypi.org:08', 'pypi.org:http', '[::1]:99999'])
      expect(badRule(r)).toMatch(/port/);
    for (const r of ['10.0.0.0/33', '10.0.0.1/8', '10.0.0.0/', '10.0.0.0/08', '10.0.0/8', '[2001:db8::1/32]'])
      expect(badRule(r)).toContain(JSON.stringify(r));
    for (const r of ['a.*.com', '*', '*pypi.org', '*.*.com', 'pypi.*']) expect(badRule(r)).toMatch(/wildcard|host name/);
    expect(badRule('2001:db8:0:0:0:0:0:1:443')).toMatch(/\[addr\]:port/);
    expect(badRule('2001:db8::/32:443')).toMatch(/\[addr\]:port/);
    for (const r of [
      '2130706433',
      '0177.0.0.1',
      '0x7f.0.0.1',
      '127.1',
      '256.0.0.1',
      'a..b',
      '-a.com',
      'a b.com',
      'a%2ecom',
      'user@host',
      'http://x',
    ]) {
      expect(badRule(r)).toContain(JSON.stringify(r));
    }
    expect(badRule(42)).toMatch(/strings/);
  });

  it('checks the lists: at most 64 rules, only allow and deny', () => {
    const many = Array.from({ length: 65 }, (_, i) => `h${i}.example.com`);
    expect(() => parseEgress({ allow: many })).toThrow(/at most 64/);
    expect(parseEgress({ allow: many.slice(0, 64) }).allow).toHaveLength(64);
    expect(() => parseEgress({ allow: 'pypi.org' })).toThrow(/array/);
    expect(() => parseEgress({ allow: [], other: [] })).toThrow(/no field/);
    expect(() => parseEgress([])).toThrow(/object/);
    expect(parseEgress({ allow: ['a.com', 'A.com.'] }).allow).toEqual(['a.com']);
    expect(parseEgress({})).toEqual({ allow: [], deny: [] });
  });
});

describe('strict IP parsing', () => {
  it('reads only dotted quads and RFC 4291 forms', () => {
    expect(parseIPv4('127.0.0.1')?.bytes).toEqual([127, 0, 0, 1]);
    for (const s of ['2130706433', '127.1', '0177.0.0.1', '0x7f.0.0.1', '1.2.3.4.5', '01.2.3.4', '1.2.3.256', ''])
      expect(parseIPv4(s)).toBeNull();
    expect(formatIp(parseIPv6('::ffff:127.0.0.1')!)).toBe('::ffff:7f00:1');
    expect(formatIp(parseIPv6('2001:db8:0:0:1:0:0:1')!)).toBe('2001:db8::1:0:0:1');
    for (const s of ['1:2:3:4:5:6:7:8:9', '::1::', 'fe80::1%eth0', '12345::', ':::', '::ffff:1.2.3']) expect(parseIPv6(s)).toBeNull();
    expect(parseTarget('2130706433')).toBeNull();
    expect(parseTarget('127.1')).toBeNull();
    expect(parseTarget('0x7f000001')).toBeNull();
    expect(parseTarget('[::1]')).toEqual({ kind: 'ip', ip: parseIPv6('::1') });
  });

  it('unwraps IPv4 inside IPv6: mapped, compatible, NAT64, 6to4', () => {
    for (const s of ['::ffff:127.0.0.1', '::127.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::', '::ffff:0:127.0.0.1']) {
      expect(formatIp(embeddedIPv4(parseIPv6(s)!)!)).toBe('127.0.0.1');
    }
    expect(embeddedIPv4(parseIPv6('::1')!)).toBeNull();
    expect(embeddedIPv4(parseIPv6('2001:db8::1')!)).toBeNull();
  });

  it('canonical names: lower-case, one trailing dot, A-labels', () => {
    expect(canonicalName('PYPI.ORG.')).toBe('pypi.org');
    expect(canonicalName('pypi.org..')).toBeNull();
    expect(canonicalName('ＰＹＰＩ．ｏｒｇ')).toBe('pypi.org');
    expect(canonicalName('１２７.0.0.1')).toBeNull();
  });
});

describe('verdict', () => {
  it('deny rules first, then allow rules, else no_rule', () => {
    const l = lists(['*.example.com', 'pypi.org:443'], ['bad.example.com']);
    expect(judgeName('files.example.com', 80, l)).toMatchObject({ verdict: 'allowed' });
    expect(judgeName('a.b.example.com', 80, l)).toMatchObject({ verdict: 'allowed' });
    expect(judgeName('example.com', 80, l)).toEqual({ verdict: 'denied', reason: 'no_rule' });
    expect(judgeName('bad.example.com', 80, l)).toEqual({ verdict: 'denied', reason: 'deny_rule' });
    expect(judgeName('pypi.org', 443, l)).toMatchObject({ verdict: 'allowed', rule: { port: 443 } });
    expect(judgeName('pypi.org', 80, l)).toEqual({ verdict: 'denied', reason: 'no_rule' });
    expect(judgeName('other.org', 443, lists([]))).toEqual({ verdict: 'denied', reason: 'no_rule' });
  });

  it('IP rules never admit a name; a name rule admits its public addresses', () => {
    const l = lists(['198.18.0.0/15', 'up.test']);
    expect(judgeName('else.test', 80, l)).toEqual({ verdict: 'denied', reason: 'no_rule' });
    const via = judgeName('up.test', 80, l);
    expect(via.verdict).toBe('allowed');
    if (via.verdict !== 'allowed') return;
    expect(passingAddresses([ip('127.0.0.1'), ip('203.0.113.9')], 80, l, [], via.rule).passing.map(formatIp)).toEqual(['203.0.113.9']);
    expect(passingAddresses([ip('127.0.0.1')], 80, l, [], via.rule)).toEqual({ passing: [], reason: 'special_address' });
    expect(passingAddresses([], 80, l, [], via.rule)).toEqual({ passing: [], reason: 'dns_failed' });
    const denyNet = lists(['up.test'], ['203.0.113.0/24']);
    expect(passingAddresses([ip('203.0.113.9')], 80, denyNet, [], via.rule).reason).toBe('deny_rule');
  });

  it('special ranges are refused unless an allow CIDR lies entirely inside the range', () => {
    const open = lists(['0.0.0.0/0', '::/0']);
    for (const s of [
      '127.0.0.1',
      '0.0.0.0',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '100.64.0.1',
      '169.254.169.254',
      '224.0.0.1',
      '255.255.255.255',
      '[::]',
      '[::1]',
      '[fc00::1]',
      '[fe80::1]',
      '[ff02::1]',
      '[::ffff:127.0.0.1]',
      '[::ffff:10.0.0.1]',
      '[64:ff9b::a00:1]',
      '[2002:a00:1::]',
      '[::127.0.0.1]',
    ]) {
      expect(judgeAddress(ip(s), 80, open, []), s).toEqual({ verdict: 'denied', reason: 'special_address' });
    }
    expect(judgeAddress(ip('198.18.0.2'), 80, open, [])).toMatchObject({ verdict: 'allowed' });
    expect(judgeAddress(ip('203.0.113.1'), 80, open, [])).toMatchObject({ verdict: 'allowed' });
    const inside = lists(['10.1.0.0/16:5432']);
    expect(judgeAddress(ip('10.1.2.3'), 5432, inside, [])).toMatchObject({ verdict: 'allowed' });
    expect(judgeAddress(ip('10.1.2.3'), 80, inside, [])).toEqual({ verdict: 'denied', reason: 'special_address' });
    expect(judgeAddress(ip('10.2.0.1'), 5432, inside, [])).toEqual({ verdict: 'denied', reason: 'special_address' });
    // A CIDR that spans a special range and more opens nothing of it.
    expect(judgeAddress(ip('10.0.0.1'), 80, lists(['8.0.0.0/6']), [])).toEqual({ verdict: 'denied', reason: 'special_address' });
  });

  it("the node's own addresses are special too", () => {
    const own = ownAddresses(['198.18.7.7', 'fe80::1%eth0', 'junk']);
    expect(own).toHaveLength(2);
    expect(judgeAddress(ip('198.18.7.7'), 22, lists(['198.18.0.0/15']), own)).toEqual({ verdict: 'denied', reason: 'special_address' });
    expect(judgeAddress(ip('[::ffff:198.18.7.7]'), 22, lists(['0.0.0.0/0', '::/0']), own)).toEqual({
      verdict: 'denied',
      reason: 'special_address',
    });
    expect(judgeAddress(ip('198.18.7.7'), 22, lists(['198.18.7.7']), own)).toMatchObject({ verdict: 'allowed' });
  });

  it('deny CIDRs apply to every form of an address', () => {
    const l = lists(['0.0.0.0/0', '::/0'], ['203.0.113.0/24']);
    expect(judgeAddress(ip('[::ffff:203.0.113.5]'), 443, l, [])).toEqual({ verdict: 'denied', reason: 'deny_rule' });
    expect(judgeAddress(ip('[2002:cb00:7105::]'), 443, l, [])).toEqual({ verdict: 'denied', reason: 'deny_rule' });
    expect(judgeAddress(ip('203.0.114.5'), 443, l, [])).toMatchObject({ verdict: 'allowed' });
  });
});
