import { describe, expect, it } from 'vitest';
import { parseRule, parseTarget, type Target } from '../../src/core/network/index.js';
import type { BoundSecret } from '../../src/core/secrets/port.js';
import { parseClientHello } from '../../src/transports/egress/client-hello.js';
import {
  authorityMatches,
  forwardPairs,
  injectSecrets,
  pairsOf,
  plainHeaders,
  strictRefusal,
  type HeaderPair,
} from '../../src/transports/egress/http-rewrite.js';

const PH_A = `sbx_secret_${'a'.repeat(32)}`;
const PH_B = `sbx_secret_${'b'.repeat(32)}`;
const PH_C = `sbx_secret_${'c'.repeat(32)}`;
const PH_FOREIGN = `sbx_secret_${'f'.repeat(32)}`;

const secret = (name: string, placeholder: string, value: string, hosts: string[], allowPlainHttp = false): BoundSecret => ({
  name,
  placeholder,
  value,
  hosts: hosts.map((h) => parseRule(h)),
  allowPlainHttp,
});
const SECRETS = [
  secret('API_TOKEN', PH_A, 'tok-123', ['api.test']),
  secret('OTHER', PH_B, 'other-456', ['*.other.test:443']),
  secret('PLAIN', PH_C, 'plain-789', ['api.test'], true),
];
const api = parseTarget('api.test') as Target;
const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');

describe('strict request checks (intercepted tunnels)', () => {
  const ok: HeaderPair[] = [['Host', 'api.test']];
  it('passes a plain request whose Host is the tunnel host (port optional when 443, case and trailing dot ignored)', () => {
    expect(strictRefusal('GET', ok, api, 443)).toBeNull();
    expect(strictRefusal('POST', [['host', 'API.test.:443']], api, 443)).toBeNull();
    expect(strictRefusal('GET', [['host', 'api.test:8443']], api, 8443)).toBeNull();
  });
  it('refuses TRACE with 405', () => {
    expect(strictRefusal('TRACE', ok, api, 443)?.status).toBe(405);
    expect(strictRefusal('trace', ok, api, 443)?.status).toBe(405);
  });
  it('refuses Content-Length beside Transfer-Encoding, and repeated Content-Length or Host, with 400', () => {
    const both: HeaderPair[] = [...ok, ['Content-Length', '5'], ['Transfer-Encoding', 'chunked']];
    expect(strictRefusal('POST', both, api, 443)).toEqual({
      status: 400,
      text: 'sbx egress: a request with both Content-Length and Transfer-Encoding is refused',
    });
    expect(strictRefusal('POST', [...ok, ['content-length', '1'], ['content-length', '1']], api, 443)?.status).toBe(400);
    expect(strictRefusal('GET', [...ok, ['Host', 'evil.test']], api, 443)?.status).toBe(400);
  });
  it('refuses a Host or :authority other than the CONNECT host, or none', () => {
    expect(strictRefusal('GET', [['Host', 'evil.test']], api, 443)?.status).toBe(400);
    expect(strictRefusal('GET', [['Host', 'api.test:444']], api, 443)?.status).toBe(400);
    expect(strictRefusal('GET', [['Host', 'api.test']], api, 8443)?.status).toBe(400);
    expect(strictRefusal('GET', [], api, 443)?.status).toBe(400);
    // HTTP/2: :authority, and a host header beside it, must both name the tunnel host.
    expect(strictRefusal('GET', [], api, 443, 'api.test')).toBeNull();
    expect(strictRefusal('GET', [], api, 443, 'evil.test')?.status).toBe(400);
    expect(strictRefusal('GET', [['host', 'evil.test']], api, 443, 'api.test')?.status).toBe(400);
  });
  it('compares IP hosts by address', () => {
    const v6 = parseTarget('[2001:db8::1]') as Target;
    expect(authorityMatches('[2001:DB8:0::1]:443', v6, 443)).toBe(true);
    expect(authorityMatches('[2001:db8::2]', v6, 443)).toBe(false);
    expect(authorityMatches('198.18.0.1', parseTarget('198.18.0.1') as Target, 443)).toBe(true);
    expect(authorityMatches('api.test:0443', api, 443)).toBe(false);
  });
});

describe('placeholder replacement', () => {
  it('replaces this sandbox placeholder in header values for a host its secret names', () => {
    const r = injectSecrets(
      [
        ['Host', 'api.test'],
        ['Authorization', `Bearer ${PH_A}`],
        ['X-Two', `${PH_A}:${PH_A}`],
      ],
      '/v1',
      SECRETS,
      api,
      443,
      false,
    );
    expect(r).toEqual({
      ok: true,
      injected: 3,
      pairs: [
        ['Host', 'api.test'],
        ['Authorization', 'Bearer tok-123'],
        ['X-Two', 'tok-123:tok-123'],
      ],
    });
  });
  it('decodes Basic credentials, replaces and re-encodes them', () => {
    const r = injectSecrets([['authorization', `Basic ${b64(`user:${PH_A}`)}`]], '/', SECRETS, api, 443, false);
    expect(r.ok && r.pairs[0]).toEqual(['authorization', `Basic ${b64('user:tok-123')}`]);
    expect(r.ok && r.injected).toBe(1);
  });
  it('never touches the URL: a placeholder in the query string goes on unchanged', () => {
    const r = injectSecrets([['Host', 'api.test']], `/q?key=${PH_A}`, SECRETS, api, 443, false);
    expect(r).toEqual({ ok: true, injected: 0, pairs: [['Host', 'api.test']] });
  });
  it('refuses another secret placeholder sent to a host its secret does not name (also inside Basic, also in the URL)', () => {
    const auth = injectSecrets([['Authorization', `Bearer ${PH_B}`]], '/', SECRETS, api, 443, false);
    expect(auth).toMatchObject({ ok: false, placeholder: 'host', refusal: { status: 403 } });
    expect(!auth.ok && auth.refusal.text).toContain('secret_not_allowed');
    expect(injectSecrets([['Authorization', `Basic ${b64(`u:${PH_B}`)}`]], '/', SECRETS, api, 443, false).ok).toBe(false);
    expect(injectSecrets([], `/?k=${PH_B}`, SECRETS, api, 443, false).ok).toBe(false);
    // OTHER names *.other.test:443 only.
    const sub = parseTarget('x.other.test') as Target;
    expect(injectSecrets([['Authorization', PH_B]], '/', SECRETS, sub, 443, false).ok).toBe(true);
    expect(injectSecrets([['Authorization', PH_B]], '/', SECRETS, sub, 8443, false).ok).toBe(false);
    expect(injectSecrets([['Authorization', PH_B]], '/', SECRETS, parseTarget('other.test') as Target, 443, false).ok).toBe(false);
  });
  it('refuses a placeholder that is not one of this sandbox (a foreign one), wherever it is', () => {
    expect(injectSecrets([['X-Key', PH_FOREIGN]], '/', SECRETS, api, 443, false)).toMatchObject({ ok: false, placeholder: 'foreign' });
    expect(injectSecrets([], `/${PH_FOREIGN}`, SECRETS, api, 443, false)).toMatchObject({ ok: false, placeholder: 'foreign' });
    expect(injectSecrets([['X-Key', PH_FOREIGN]], '/', [], api, 443, false)).toMatchObject({ ok: false });
  });
  it('plain HTTP: only a secret created with allowPlainHttp is injected; the others are refused', () => {
    expect(injectSecrets([['Authorization', PH_C]], '/', SECRETS, api, 80, true)).toMatchObject({ ok: true, injected: 1 });
    expect(injectSecrets([['Authorization', PH_A]], '/', SECRETS, api, 80, true)).toMatchObject({ ok: false, placeholder: 'plain' });
  });
  it('refuses a value that would split a header', () => {
    const bad = [secret('CRLF', PH_A, 'x\r\nInjected: 1', ['api.test'])];
    expect(injectSecrets([['Authorization', PH_A]], '/', bad, api, 443, false).ok).toBe(false);
  });
  it('drops hop-by-hop and proxy headers on the way on', () => {
    const pairs = pairsOf([
      'Host',
      'a',
      'Connection',
      'keep-alive',
      'Proxy-Authorization',
      'x',
      'TE',
      'trailers',
      'Accept',
      '*/*',
      'Expect',
      '100-continue',
    ]);
    expect(forwardPairs(pairs)).toEqual([['Accept', '*/*']]);
  });
  it('plain-HTTP proxy headers: placeholders replaced or refused; the source failing answers 502', async () => {
    const raw = ['Host', 'api.test', 'Authorization', PH_C, 'Proxy-Connection', 'keep-alive', 'Accept', 'a', 'Accept', 'b'];
    expect(await plainHeaders(raw, 'http://api.test/', async () => SECRETS, api, 80)).toEqual({
      headers: { authorization: 'plain-789', accept: ['a', 'b'] },
      injected: true,
    });
    expect(await plainHeaders(['Authorization', PH_A], 'http://api.test/', async () => SECRETS, api, 80)).toMatchObject({ status: 403 });
    const failing = async (): Promise<BoundSecret[]> => {
      throw new Error('store down');
    };
    expect(await plainHeaders(['Accept', 'a'], 'http://api.test/', failing, api, 80)).toMatchObject({ status: 502 });
    // No source (no secrets service here): headers pass as before.
    expect(await plainHeaders(['X', PH_FOREIGN], 'http://api.test/', null, api, 80)).toEqual({
      headers: { x: PH_FOREIGN },
      injected: false,
    });
  });
});

describe('ClientHello ALPN', () => {
  it('reads the offered protocols; a malformed list is not a ClientHello', () => {
    // A minimal ClientHello: version, random, empty session id, one suite, null compression, ALPN [h2, http/1.1].
    const alpn = Buffer.concat([Buffer.from([0, 12, 2]), Buffer.from('h2'), Buffer.from([8]), Buffer.from('http/1.1')]);
    const ext = Buffer.concat([Buffer.from([0, 16, 0, alpn.length]), alpn]);
    const body = Buffer.concat([Buffer.from([3, 3]), Buffer.alloc(32), Buffer.from([0, 0, 2, 0x13, 0x01, 1, 0, 0, ext.length]), ext]);
    const hs = Buffer.concat([Buffer.from([1, 0, 0, body.length]), body]);
    const rec = Buffer.concat([Buffer.from([0x16, 3, 1, 0, hs.length]), hs]);
    expect(parseClientHello(rec)).toEqual({ kind: 'hello', sni: null, alpn: ['h2', 'http/1.1'] });
    const broken = Buffer.from(rec);
    broken[rec.length - 9] = 200; // the second name's length runs past the list
    expect(parseClientHello(broken)).toEqual({ kind: 'invalid' });
  });
});
