import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Envd access tokens (DESIGN.md §14): what E2B's SDK sends as `X-Access-Token` to a sandbox's envd
 * plane. The store keeps only a random seed per sandbox; the token is an HMAC of the sandbox id and
 * that seed under the installation secret, so it can be handed out again (connect) without being
 * stored, and a copy of the rows alone does not give it. Never logged, never in an event.
 */
const LABEL = 'sbx-envd-access-token-v1';

/** The token of a sandbox: unpadded base64url of HMAC-SHA256(secret, label:id:seed). */
export function accessTokenOf(secret: string, sandboxId: string, seed: string): string {
  return createHmac('sha256', secret).update(`${LABEL}:${sandboxId}:${seed}`).digest('base64url');
}

/** Constant-time check of a presented token (the envd plane's check); false when the sandbox has no token. */
export function accessTokenMatches(secret: string, sandboxId: string, seed: string | null | undefined, presented: string): boolean {
  if (!seed) return false;
  const want = Buffer.from(accessTokenOf(secret, sandboxId, seed));
  const got = Buffer.from(presented);
  return got.length === want.length && timingSafeEqual(got, want);
}
