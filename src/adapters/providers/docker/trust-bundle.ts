/**
 * The trust bundle of a filtered sandbox (DESIGN.md §15): the image's CA bundle (read from the
 * created container before it starts, when the image has one) followed by the node's CA, written
 * on the host under the data dir and bind-mounted read-only at CA_BUNDLE_PATH — never written into
 * the image, so a snapshot or fork does not carry it — with the variables common TLS stacks read
 * pointing at it. Nothing secret is in it.
 */
import { mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type Docker from 'dockerode';
import { openViaArchive } from './archive.js';

export const CA_BUNDLE_PATH = '/etc/sbx/ca-bundle.crt';
/** What OpenSSL, curl, Python requests and Node read for extra or replacement CAs. */
export const CA_VARS = ['SSL_CERT_FILE', 'NODE_EXTRA_CA_CERTS', 'REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'] as const;
/** Where images keep their CA bundle (Debian/Ubuntu/Alpine, RHEL/Fedora, openSUSE, Alpine's link), first found wins. */
export const IMAGE_CA_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
];
/** An image's bundle read at most (larger: ignored, the node's CA alone). */
const MAX_IMAGE_BUNDLE = 4 << 20;

const fileOf = (sandboxId: string) => `${sandboxId.replace(/[^A-Za-z0-9_.-]/g, '_')}.crt`;

export class TrustBundles {
  /** Container id → bundle file, for removal at destroy. */
  private readonly byContainer = new Map<string, string>();

  constructor(
    private readonly docker: Docker,
    /** The node's CA certificate (PEM). */
    readonly caPem: string,
    private readonly dir: string,
  ) {}

  /** A sandbox's bundle file with the node's CA alone for now (the bind source must exist at create). */
  async make(sandboxId: string): Promise<string> {
    await mkdir(this.dir, { recursive: true, mode: 0o755 });
    const path = join(this.dir, fileOf(sandboxId));
    await writeInPlace(path, this.caPem);
    return path;
  }

  /** The created (not yet started) container's image bundle, then the node's CA, into its file. */
  async fill(path: string, containerId: string, signal?: AbortSignal): Promise<void> {
    this.byContainer.set(containerId, path);
    const image = await this.imageBundle(containerId, signal);
    const sep = image === '' || image.endsWith('\n') ? '' : '\n';
    await writeInPlace(path, `${image}${sep}${this.caPem}`);
  }

  private async imageBundle(containerId: string, signal?: AbortSignal): Promise<string> {
    for (const candidate of IMAGE_CA_BUNDLES) {
      try {
        const file = await openViaArchive(this.docker, containerId, candidate, MAX_IMAGE_BUNDLE, signal);
        const chunks: Buffer[] = [];
        for await (const c of file.body) chunks.push(Buffer.from(c));
        const text = Buffer.concat(chunks).toString('utf8');
        if (text.includes('-----BEGIN CERTIFICATE-----')) return text;
      } catch (err) {
        if (signal?.aborted) throw err;
        // Missing, not a file, too large: the next candidate.
      }
    }
    return '';
  }

  /** The container's bundle goes with it. */
  async forget(containerId: string): Promise<void> {
    const path = this.byContainer.get(containerId);
    this.byContainer.delete(containerId);
    if (path) await rm(path, { force: true });
  }

  /** Removes bundles of sandboxes without a container (left by a run that ended before their destroy). */
  async sweep(liveSandboxIds: ReadonlySet<string>): Promise<void> {
    let names: string[];
    try {
      names = await readdir(this.dir);
    } catch {
      return;
    }
    const keep = new Set([...liveSandboxIds].map(fileOf));
    for (const n of names) if (n.endsWith('.crt') && !keep.has(n)) await rm(join(this.dir, n), { force: true });
  }
}

/** Rewrites the file's content on the same inode (a bind mount of it sees the new content), 0644: the sandbox user reads it. */
async function writeInPlace(path: string, text: string): Promise<void> {
  const fh = await open(path, 'w', 0o644);
  try {
    await fh.writeFile(text);
    await fh.chmod(0o644);
  } finally {
    await fh.close();
  }
}
