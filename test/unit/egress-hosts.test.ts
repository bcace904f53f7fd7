/**
 * The egress gateway's resolver (DESIGN.md §10): the hosts-file parser, the re-read when the file
 * changes (stat at most once per interval), the hosts file before DNS, and a hosts-file name that
 * maps into a special range refused by a real gateway. Also the firewall's rule order and how it
 * reads `iptables -S` lines.
 */
import { request } from 'node:http';
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { firewallRules, ruleWords } from '../../src/transports/egress/firewall.js';
import { EgressGateway, type VerdictRecord } from '../../src/transports/egress/gateway.js';
import { HostsFile, hostResolver, parseHosts } from '../../src/transports/egress/resolver.js';
import { tempDir } from '../helpers/tmp.js';

describe('parseHosts', () => {
  it('reads address and names per line; comments, blanks and bad lines are ignored', () => {
    const map = parseHosts(
      [
        '# a comment line',
        '127.0.0.1\tlocalhost',
        '',
        '   ',
        '10.1.2.3   db.internal  DB   cache.Internal. # trailing comment',
        '198.18.7.2 first.test',
        '198.18.7.3 first.test second.test',
        'fe80::1%eth0 zoned.test',
        '2001:db8::7 six.test',
        '::ffff:10.0.0.1 mapped.test',
        '127.1 short.test',
        '2130706433 decimal.test',
        '300.1.1.1 big.test',
        'not-an-address name.test',
        '198.18.7.9',
        '198.18.7.4 ok.test bad_name!.test -dash.test also.test',
        '198.18.7.5 #commented.test',
        '198.18.7.6 bücher.test\r',
      ].join('\n'),
    );
    expect(Object.fromEntries(map)).toEqual({
      localhost: '127.0.0.1',
      'db.internal': '10.1.2.3',
      db: '10.1.2.3',
      'cache.internal': '10.1.2.3',
      'first.test': '198.18.7.2',
      'second.test': '198.18.7.3',
      'six.test': '2001:db8::7',
      'mapped.test': '::ffff:10.0.0.1',
      'ok.test': '198.18.7.4',
      'also.test': '198.18.7.4',
      'xn--bcher-kva.test': '198.18.7.6',
    });
  });

  it('is case-insensitive and the first match wins, across families too', () => {
    const map = parseHosts('198.18.1.1 Mixed.Case.TEST\n2001:db8::1 mixed.case.test v6first.test\n198.18.1.2 V6FIRST.test\n');
    expect(map.get('mixed.case.test')).toBe('198.18.1.1');
    expect(map.get('v6first.test')).toBe('2001:db8::1');
  });
});

describe('HostsFile', () => {
  const dir = tempDir('sbx-hosts-');

  it('answers from the file, re-reads it when it changes (at most once per interval), and survives its absence', async () => {
    const path = join(dir, 'hosts');
    writeFileSync(path, '198.18.2.1 one.test\n');
    const hosts = new HostsFile(path, 300);
    expect(await hosts.lookup('one.test')).toBe('198.18.2.1');
    expect(await hosts.lookup('two.test')).toBeNull();
    // Same size, new content: within the interval the old reading stands.
    writeFileSync(path, '198.18.2.9 one.test\n198.18.2.2 two.test\n');
    expect(await hosts.lookup('one.test')).toBe('198.18.2.1');
    await new Promise((r) => setTimeout(r, 350));
    expect(await hosts.lookup('one.test')).toBe('198.18.2.9');
    expect(await hosts.lookup('two.test')).toBe('198.18.2.2');
    // Replaced by rename (a new inode), as editors and `mount --bind` do.
    writeFileSync(`${path}.new`, '198.18.2.3 one.test\n');
    renameSync(`${path}.new`, path);
    await new Promise((r) => setTimeout(r, 350));
    expect(await hosts.lookup('one.test')).toBe('198.18.2.3');
    rmSync(path);
    await new Promise((r) => setTimeout(r, 350));
    expect(await hosts.lookup('one.test')).toBeNull();
  });

  it('stats the file once per interval however many lookups come', async () => {
    const path = join(dir, 'hosts-many');
    writeFileSync(path, '198.18.3.1 many.test\n');
    const hosts = new HostsFile(path, 60_000);
    const answers = await Promise.all(Array.from({ length: 200 }, () => hosts.lookup('many.test')));
    expect(new Set(answers)).toEqual(new Set(['198.18.3.1']));
    writeFileSync(path, '198.18.3.2 many.test\n');
    expect(await hosts.lookup('many.test')).toBe('198.18.3.1');
  });

  it('the hosts file comes before DNS; DNS answers the rest', async () => {
    const path = join(dir, 'hosts-first');
    writeFileSync(path, '198.18.4.1 internal.test\n');
    const asked: string[] = [];
    const resolve = hostResolver(new HostsFile(path), async (name) => {
      asked.push(name);
      return ['198.18.4.99'];
    });
    expect(await resolve('internal.test')).toEqual(['198.18.4.1']);
    expect(await resolve('public.test')).toEqual(['198.18.4.99']);
    expect(asked).toEqual(['public.test']);
  });
});

describe('a gateway resolving through a hosts file', () => {
  const dir = tempDir('sbx-hosts-gw-');
  const verdicts: VerdictRecord[] = [];
  let gw: EgressGateway | undefined;
  afterAll(async () => gw?.close());

  it('refuses a hosts-file name that maps into a special range (special_address), not dns_failed', async () => {
    const path = join(dir, 'hosts');
    writeFileSync(path, '127.0.0.1 loop.test\n10.9.9.9 private.test\n');
    gw = new EgressGateway({
      host: '127.0.0.1',
      port: 0,
      sandboxFor: async () => 'sb-hosts',
      rules: async () => ({ allow: ['loop.test', 'private.test', 'nowhere.invalid'], deny: [] }),
      resolve: hostResolver(new HostsFile(path), async () => []),
      onVerdict: (v) => verdicts.push(v),
    });
    await gw.start();
    const get = (url: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const r = request({ host: '127.0.0.1', port: gw!.port, path: url }, (res) => {
          let body = '';
          res.on('data', (d) => (body += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        });
        r.on('error', reject);
        r.end();
      });
    expect(await get('http://loop.test/')).toEqual({ status: 403, body: 'sbx egress: denied (special_address): loop.test:80\n' });
    expect((await get('http://private.test/')).body).toContain('denied (special_address)');
    expect((await get('http://nowhere.invalid/')).body).toContain('denied (dns_failed)');
    expect(verdicts.map((v) => v.reason)).toEqual(['special_address', 'special_address', 'dns_failed']);
  });
});

describe('host firewall rules', () => {
  it('replies to host-opened connections pass first; the reject comes last', () => {
    const rules = firewallRules({ subnet: '172.30.0.0/16', gateway: '172.30.0.1', port: 3128, tag: 'sbx-egress:sbx-filtered-x' });
    expect(rules[0]).toEqual([
      '-s',
      '172.30.0.0/16',
      '-m',
      'conntrack',
      '--ctstate',
      'ESTABLISHED',
      '-m',
      'comment',
      '--comment',
      'sbx-egress:sbx-filtered-x',
      '-j',
      'ACCEPT',
    ]);
    expect(rules.at(-1)).toEqual(['-s', '172.30.0.0/16', '-m', 'comment', '--comment', 'sbx-egress:sbx-filtered-x', '-j', 'REJECT']);
    expect(rules[1]).toEqual(expect.arrayContaining(['-p', 'icmp', '--ctstate', 'RELATED']));
    expect(rules.filter((r) => r.includes('RELATED'))).toHaveLength(1);
    expect(rules.filter((r) => r.includes('REJECT'))).toHaveLength(1);
  });

  it('reads iptables -S lines as the shell would (quoted comments)', () => {
    expect(ruleWords('-A INPUT -s 172.30.0.0/16 -m comment --comment "sbx-egress:sbx-filtered-x" -j REJECT')).toEqual([
      '-A',
      'INPUT',
      '-s',
      '172.30.0.0/16',
      '-m',
      'comment',
      '--comment',
      'sbx-egress:sbx-filtered-x',
      '-j',
      'REJECT',
    ]);
    expect(ruleWords('-A INPUT -m comment --comment "two \\"quoted\\" words" -j ACCEPT')).toContain('two "quoted" words');
  });
});
