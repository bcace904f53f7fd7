/**
 * Options for E2B's SDK (DESIGN.md §14) pointed at a test server: the control plane at `/e2b`, the
 * envd plane at `/e2b/sandbox` (E2B_SANDBOX_URL mode). Every request the SDK logs is recorded in
 * `requested`, so a suite can assert that none left for E2B's public hosts.
 */
const DEFAULT_KEY = 'e2b_0123456789abcdef0123456789abcdef01234567';

export interface EnvdSdk {
  apiUrl: string;
  sandboxUrl: string;
  apiKey: string;
  domain: string;
  retries: number;
  logger: { info: (...a: unknown[]) => void; error: () => void; warn: () => void; debug: () => void };
}

export function envdSdkFor(url: string, requested: string[], apiKey = DEFAULT_KEY): EnvdSdk {
  const record = (...a: unknown[]) => {
    const m = /^Request:? \w+ (\S+)/.exec(a.map(String).join(' '));
    if (m) requested.push(m[1]!);
  };
  return {
    apiUrl: `${url}/e2b`,
    sandboxUrl: `${url}/e2b/sandbox`,
    apiKey,
    domain: `localhost:${new URL(url).port}`,
    retries: 0,
    logger: { info: record, error: () => undefined, warn: () => undefined, debug: () => undefined },
  };
}
