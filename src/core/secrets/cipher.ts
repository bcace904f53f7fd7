/**
 * Encryption of secret values at rest (DESIGN.md §15): AES-256-GCM with a random 12-byte nonce per
 * value and the owner and name as associated data (a ciphertext moved to another row does not
 * decrypt). Three keys are derived from the configured key material with HKDF: one encrypts, one
 * keys the fingerprint of a value, one the verifier a store keeps so that a process with another key
 * refuses to start. Nothing here logs or throws a value.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/** The shortest key material accepted from `auth.secrets_key` (a generated key is 64 hex digits). */
export const MIN_KEY_CHARS = 32;
const VERSION = 'v1:';
const NONCE = 12;
const TAG = 16;
const VERIFIER_TEXT = 'sbx secrets key verifier v1';

function derive(material: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(material, 'utf8'), 'sbx-secrets', purpose, 32));
}

function aad(owner: string, name: string): Buffer {
  return Buffer.from(`sbx-secret\0${owner}\0${name}`, 'utf8');
}

export class SecretCipher {
  private readonly encKey: Buffer;
  private readonly fpKey: Buffer;
  private readonly verifierKey: Buffer;

  /** `material`: the configured or generated key, at least MIN_KEY_CHARS characters (checked by the caller). */
  constructor(material: string) {
    this.encKey = derive(material, 'encryption');
    this.fpKey = derive(material, 'fingerprint');
    this.verifierKey = derive(material, 'verifier');
  }

  /** New key material for a lone node: 32 random bytes as hex. */
  static generateKey(): string {
    return randomBytes(32).toString('hex');
  }

  encrypt(value: string, owner: string, name: string): string {
    const nonce = randomBytes(NONCE);
    const cipher = createCipheriv('aes-256-gcm', this.encKey, nonce);
    cipher.setAAD(aad(owner, name));
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    return VERSION + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString('base64');
  }

  /** The value, or an Error (never naming the value) when the ciphertext, its row or the key does not match. */
  decrypt(text: string, owner: string, name: string): string {
    if (!text.startsWith(VERSION)) throw new Error(`secret ${name}: unknown ciphertext format`);
    const raw = Buffer.from(text.slice(VERSION.length), 'base64');
    if (raw.length < NONCE + TAG) throw new Error(`secret ${name}: ciphertext too short`);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.encKey, raw.subarray(0, NONCE));
      decipher.setAAD(aad(owner, name));
      decipher.setAuthTag(raw.subarray(raw.length - TAG));
      return Buffer.concat([decipher.update(raw.subarray(NONCE, raw.length - TAG)), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(`secret ${name} does not decrypt with this key (auth.secrets_key differs from the one it was stored with)`);
    }
  }

  /** First 8 hex of an HMAC of the value: shows that a value changed without telling anything of it. */
  fingerprint(value: string): string {
    return createHmac('sha256', this.fpKey).update(value, 'utf8').digest('hex').slice(0, 8);
  }

  /** What the store keeps to tell a wrong key at start: an HMAC of a fixed text under a derived key. */
  verifier(): string {
    return createHmac('sha256', this.verifierKey).update(VERIFIER_TEXT).digest('hex');
  }
}
