/**
 * What the egress gateway needs to intercept tunnels for secrets (DESIGN.md §15): the node's CA
 * (generated into `<home>/.sbx/egress-ca`, its key never leaving that directory) and the trust an
 * upstream is verified against — the host's trust store (Node's bundled roots when the host has
 * none) plus `providers.docker.egress_ca_file`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSecureContext, rootCertificates } from 'node:tls';
import type { SbxConfig } from '../config/index.js';
import { GATEWAY_CIPHERS, type InterceptTls } from '../transports/egress/intercept.js';

/** Where distributions keep the host's CA bundle, first match wins. */
export const HOST_CA_BUNDLES = [
  '/etc/ssl/certs/ca-certificates.crt',
  '/etc/pki/tls/certs/ca-bundle.crt',
  '/etc/ssl/ca-bundle.pem',
  '/etc/ssl/cert.pem',
];

function hostTrust(): string[] {
  for (const p of HOST_CA_BUNDLES) {
    try {
      const text = readFileSync(p, 'utf8');
      if (text.includes('-----BEGIN CERTIFICATE-----')) return [text];
    } catch {
      // next candidate
    }
  }
  return [...rootCertificates];
}

/** The upstream trust: the host's store plus the PEM file `extraFile` ('' = none); a bad file throws naming the key. */
export function upstreamTrust(extraFile: string) {
  const ca = hostTrust();
  if (extraFile) {
    let text: string;
    try {
      text = readFileSync(extraFile, 'utf8');
    } catch (err) {
      throw new Error(`providers.docker.egress_ca_file: cannot read ${extraFile}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`);
    }
    if (!text.includes('-----BEGIN CERTIFICATE-----'))
      throw new Error(`providers.docker.egress_ca_file: ${extraFile} holds no PEM certificate`);
    ca.push(text);
  }
  return createSecureContext({ ca, ciphers: GATEWAY_CIPHERS });
}

/** The node's CA directory under the data dir. */
export const egressCaDir = (home: string) => join(home, '.sbx', 'egress-ca');

/** The CA (made on first use) and the interception trust the gateway gets. */
export async function loadInterception(config: SbxConfig, home: string): Promise<{ tls: InterceptTls; caPem: string; dir: string }> {
  const { NodeCa } = await import('../adapters/system/tls-ca.js');
  const dir = egressCaDir(home);
  const ca = await NodeCa.open(dir);
  const upstream = upstreamTrust(config.providers.docker.egress_ca_file);
  return { tls: { leaf: (host) => ca.leaf(host), upstream }, caPem: ca.certPem, dir };
}
