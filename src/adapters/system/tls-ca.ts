/**
 * The node's certificate authority for the egress gateway's interception (DESIGN.md §15): one per
 * node (control plane or worker), an ECDSA P-256 key generated into the data dir (0600, in a 0700
 * directory; never leaves the node, never logged), and short-lived leaf certificates for exactly
 * one name (never a wildcard) or one IP address, signed by it and cached per host until shortly
 * before they expire.
 */
// Before @peculiar/x509: its tsyringe needs the Reflect metadata API at load.
import './reflect-metadata.js';
import { KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { chmod, mkdir, open, readFile, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import * as x509 from '@peculiar/x509';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const crypto = webcrypto;
x509.cryptoProvider.set(crypto as never);

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const HOUR = 3_600_000;
/** Leaves live 24 h and are made again when less than 1 h is left. */
const LEAF_LIFETIME_MS = 24 * HOUR;
const LEAF_RENEW_MS = HOUR;
/** Leaves kept in memory at most (the oldest go first). */
const MAX_LEAVES = 1_000;
const CA_FILE = 'ca.crt';
const KEY_FILE = 'ca.key';

/** The host a leaf is for: a canonical name (a DNS SAN) or an IP literal (an IP SAN). */
export type LeafHost = { kind: 'name'; name: string } | { kind: 'ip'; address: string };

export interface Leaf {
  /** PEM of the leaf, then the CA. */
  certPem: string;
  keyPem: string;
  notAfter: Date;
}

const pem = (label: string, der: ArrayBuffer) =>
  `-----BEGIN ${label}-----\n${(
    Buffer.from(der)
      .toString('base64')
      .match(/.{1,64}/g) ?? []
  ).join('\n')}\n-----END ${label}-----\n`;

const serial = () => {
  const b = randomBytes(16);
  b[0] = b[0]! & 0x7f; // positive
  return b.toString('hex');
};

export class NodeCa {
  private readonly leaves = new Map<string, Promise<Leaf>>();

  private constructor(
    /** The CA certificate (PEM): what sandboxes trust. */
    readonly certPem: string,
    private readonly cert: x509.X509Certificate,
    private readonly key: CryptoKey,
    /** Where the CA lives (the trust bundles of sandboxes go beside it). */
    readonly dir: string,
  ) {}

  /** The CA in `dir`, made on first use (key 0600, written before the certificate, both atomically). */
  static async open(dir: string, name = 'sbx egress CA'): Promise<NodeCa> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    const keyPath = join(dir, KEY_FILE);
    const certPath = join(dir, CA_FILE);
    const have = await stat(keyPath).then(
      () => true,
      () => false,
    );
    if (have) {
      const [keyPem, certPem] = await Promise.all([readFile(keyPath, 'utf8'), readFile(certPath, 'utf8')]);
      await chmod(keyPath, 0o600);
      const cert = new x509.X509Certificate(certPem);
      const der = Buffer.from(keyPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
      const key = await crypto.subtle.importKey('pkcs8', der, EC, false, ['sign']);
      return new NodeCa(certPem, cert, key, dir);
    }
    const keys = (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
    const now = Date.now();
    const cert = await x509.X509CertificateGenerator.createSelfSigned({
      serialNumber: serial(),
      name: `CN=${name.replace(/[,=+<>#;\\"]/g, ' ')}, O=sbx`,
      notBefore: new Date(now - HOUR),
      notAfter: new Date(now + 10 * 365 * 24 * HOUR),
      keys,
      signingAlgorithm: SIGN,
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    const keyPem = pem('PRIVATE KEY', await crypto.subtle.exportKey('pkcs8', keys.privateKey));
    await writeAtomic(keyPath, keyPem, 0o600);
    const certPem = cert.toString('pem');
    await writeAtomic(certPath, `${certPem}\n`, 0o644);
    const key = await crypto.subtle.importKey('pkcs8', await crypto.subtle.exportKey('pkcs8', keys.privateKey), EC, false, ['sign']);
    return new NodeCa(`${certPem}\n`, cert, key, dir);
  }

  /** The leaf for a host: cached, made again when less than an hour of its 24 h is left. */
  leaf(host: LeafHost): Promise<Leaf> {
    const k = host.kind === 'name' ? `n:${host.name}` : `i:${host.address}`;
    const hit = this.leaves.get(k);
    if (hit !== undefined) {
      return hit.then(
        (l) => (l.notAfter.getTime() - Date.now() > LEAF_RENEW_MS ? l : this.make(k, host)),
        () => this.make(k, host),
      );
    }
    return this.make(k, host);
  }

  private make(k: string, host: LeafHost): Promise<Leaf> {
    const p = this.issue(host);
    this.leaves.delete(k);
    if (this.leaves.size >= MAX_LEAVES) this.leaves.delete(this.leaves.keys().next().value!);
    this.leaves.set(k, p);
    p.catch(() => this.leaves.get(k) === p && this.leaves.delete(k));
    return p;
  }

  private async issue(host: LeafHost): Promise<Leaf> {
    const keys = (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
    const now = Date.now();
    const notAfter = new Date(now + LEAF_LIFETIME_MS);
    const cn = host.kind === 'name' ? host.name : host.address;
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serial(),
      subject: `CN=${cn}`,
      issuer: this.cert.subject,
      notBefore: new Date(now - 5 * 60_000),
      notAfter,
      publicKey: keys.publicKey,
      signingKey: this.key,
      signingAlgorithm: SIGN,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
        new x509.SubjectAlternativeNameExtension([
          host.kind === 'name' ? { type: 'dns', value: host.name } : { type: 'ip', value: host.address },
        ]),
        await x509.AuthorityKeyIdentifierExtension.create(this.cert),
      ],
    });
    const keyPem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string;
    const certPem = `${cert.toString('pem')}\n${this.certPem}`;
    return { certPem, keyPem, notAfter };
  }
}

async function writeAtomic(path: string, text: string, mode: number): Promise<void> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await chmod(tmp, mode);
  await rename(tmp, path);
}
