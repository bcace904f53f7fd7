/**
 * The node's certificate authority for the egress gateway's interception (DESIGN.md §15): one per
 * node (control plane or worker), an ECDSA P-256 key generated into the data dir (0600, in a 0700
 * directory; never leaves the node, never logged), and short-lived leaf certificates for exactly
 * one name (never a wildcard) or one IP address, signed by it and cached per host until shortly
 * before they expire.
 */
import { KeyObject, randomBytes, webcrypto } from 'node:crypto';
import { chmod, link, mkdir, open, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type * as X509 from '@peculiar/x509';
import { installReflectMetadata } from './reflect-metadata.js';

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const crypto = webcrypto;

let loaded: Promise<typeof X509> | null = null;
/**
 * @peculiar/x509, loaded on first use after the Reflect metadata API its tsyringe checks for at
 * load is in place (a static import would be evaluated first, before any code of this module,
 * once the CLI bundle hoists it).
 */
function x509lib(): Promise<typeof X509> {
  loaded ??= (async () => {
    installReflectMetadata();
    const m = (await import('@peculiar/x509')) as typeof X509 & { default?: typeof X509 };
    const lib = m.X509CertificateGenerator ? m : m.default!;
    lib.cryptoProvider.set(crypto as never);
    return lib;
  })();
  return loaded;
}

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
    private readonly cert: X509.X509Certificate,
    private readonly key: CryptoKey,
    /** Where the CA lives (the trust bundles of sandboxes go beside it). */
    readonly dir: string,
  ) {}

  /**
   * The CA in `dir`, made on first use. `ca.key` (0600) holds the key and its certificate
   * together and is installed with an exclusive link, so two processes starting at once agree on
   * one CA (the loser reads the winner's); `ca.crt` is the certificate alone, for sandboxes.
   */
  static async open(dir: string, name = 'sbx egress CA'): Promise<NodeCa> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    await chmod(dir, 0o700);
    const keyPath = join(dir, KEY_FILE);
    let text = await readFile(keyPath, 'utf8').catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return null;
      throw err;
    });
    if (text === null) {
      const made = await NodeCa.generate(name);
      const tmp = await writeTemp(keyPath, made, 0o600);
      try {
        await link(tmp, keyPath);
        text = made;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
        text = await readFile(keyPath, 'utf8');
      } finally {
        await unlink(tmp).catch(() => undefined);
      }
    }
    await chmod(keyPath, 0o600);
    const keyPem = /-----BEGIN PRIVATE KEY-----[^-]+-----END PRIVATE KEY-----/.exec(text)?.[0];
    const certPem = /-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/.exec(text)?.[0];
    if (!keyPem || !certPem) throw new Error(`${keyPath} does not hold a private key and its certificate`);
    const der = Buffer.from(keyPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    const key = await crypto.subtle.importKey('pkcs8', der, EC, false, ['sign']);
    const certText = `${certPem}\n`;
    const certPath = join(dir, CA_FILE);
    if ((await readFile(certPath, 'utf8').catch(() => '')) !== certText) await rename(await writeTemp(certPath, certText, 0o644), certPath);
    return new NodeCa(certText, new (await x509lib()).X509Certificate(certPem), key, dir);
  }

  /** A new CA: its key (PKCS#8) and self-signed certificate, PEM, in one text. */
  private static async generate(name: string): Promise<string> {
    const x509 = await x509lib();
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
    return `${pem('PRIVATE KEY', await crypto.subtle.exportKey('pkcs8', keys.privateKey))}${cert.toString('pem')}\n`;
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
    const x509 = await x509lib();
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

/** A new file beside `path` (exclusive, `mode`, synced) holding `text`; its name. */
async function writeTemp(path: string, text: string, mode: number): Promise<string> {
  const tmp = `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(text);
    await fh.chmod(mode);
    await fh.sync();
  } finally {
    await fh.close();
  }
  return tmp;
}
