import { X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { NodeCa } from '../../src/adapters/system/tls-ca.js';
import { tempDir } from '../helpers/tmp.js';

describe("the node's egress CA (DESIGN §15)", () => {
  it('is made once into its directory: key 0600 in a 0700 directory, the same CA on the next open', async () => {
    const dir = join(tempDir('sbx-ca-'), 'egress-ca');
    const ca = await NodeCa.open(dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'ca.key')).mode & 0o777).toBe(0o600);
    const cert = new X509Certificate(ca.certPem);
    expect(cert.ca).toBe(true);
    expect(cert.checkIssued(cert)).toBe(true);
    expect(readFileSync(join(dir, 'ca.crt'), 'utf8')).toBe(ca.certPem);
    // The key stays in its file: the certificate text holds no private key.
    expect(ca.certPem).not.toContain('PRIVATE KEY');
    const again = await NodeCa.open(dir);
    expect(again.certPem).toBe(ca.certPem);
    // A leaf the reopened CA signs verifies against the first one's certificate.
    const leaf = new X509Certificate((await again.leaf({ kind: 'name', name: 'api.test' })).certPem);
    expect(leaf.verify(cert.publicKey)).toBe(true);
  });

  it('two processes opening one directory at once agree on one CA (the key file is installed exclusively)', async () => {
    const dir = join(tempDir('sbx-ca-'), 'egress-ca');
    const [a, b, c] = await Promise.all([NodeCa.open(dir), NodeCa.open(dir), NodeCa.open(dir)]);
    expect(b.certPem).toBe(a.certPem);
    expect(c.certPem).toBe(a.certPem);
    expect(readFileSync(join(dir, 'ca.crt'), 'utf8')).toBe(a.certPem);
    const leaf = new X509Certificate((await b.leaf({ kind: 'name', name: 'x.test' })).certPem);
    expect(leaf.verify(new X509Certificate(a.certPem).publicKey)).toBe(true);
    // Nothing but the CA's two files is left behind.
    expect(readdirSync(dir).sort()).toEqual(['ca.crt', 'ca.key']);
  });

  it('signs a leaf for exactly one name (no wildcard) or one IP, short-lived, cached per host', async () => {
    const ca = await NodeCa.open(join(tempDir('sbx-ca-'), 'egress-ca'));
    const caCert = new X509Certificate(ca.certPem);
    const l1 = await ca.leaf({ kind: 'name', name: 'api.test' });
    const cert = new X509Certificate(l1.certPem);
    expect(cert.subjectAltName).toBe('DNS:api.test');
    expect(cert.ca).toBe(false);
    expect(cert.issuer).toBe(caCert.subject);
    expect(cert.checkIssued(caCert)).toBe(true);
    expect(cert.verify(caCert.publicKey)).toBe(true);
    expect(cert.checkHost('api.test')).toBe('api.test');
    expect(cert.checkHost('x.api.test')).toBeUndefined();
    const life = Date.parse(cert.validTo) - Date.parse(cert.validFrom);
    expect(life).toBeGreaterThan(23 * 3_600_000);
    expect(life).toBeLessThanOrEqual(25 * 3_600_000);
    // The chain: the leaf, then the CA.
    expect(l1.certPem.endsWith(ca.certPem)).toBe(true);
    expect(await ca.leaf({ kind: 'name', name: 'api.test' })).toBe(l1);
    const ip = new X509Certificate((await ca.leaf({ kind: 'ip', address: '2001:db8::1' })).certPem);
    expect(ip.subjectAltName).toBe('IP Address:2001:DB8:0:0:0:0:0:1');
    expect(ip.checkIP('2001:db8::1')).toBe('2001:db8::1');
    const v4 = new X509Certificate((await ca.leaf({ kind: 'ip', address: '198.18.0.9' })).certPem);
    expect(v4.checkIP('198.18.0.9')).toBe('198.18.0.9');
    expect(v4.subjectAltName).not.toContain('DNS:');
  });
});
