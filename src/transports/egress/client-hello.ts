/**
 * The server name (SNI) of a TLS ClientHello, read from the first bytes of a CONNECT tunnel
 * (DESIGN.md §10). Bounded: one TLS record of at most 16 KiB; anything else is not a ClientHello.
 */
export type HelloResult = { kind: 'incomplete' } | { kind: 'invalid' } | { kind: 'hello'; sni: string | null; alpn?: string[] };

export const MAX_HELLO_BYTES = 5 + 16_384;

export function parseClientHello(buf: Uint8Array): HelloResult {
  if (buf.length < 5) return buf.length > 0 && buf[0] !== 0x16 ? { kind: 'invalid' } : { kind: 'incomplete' };
  if (buf[0] !== 0x16 || buf[1] !== 0x03) return { kind: 'invalid' };
  const recordLen = (buf[3]! << 8) | buf[4]!;
  if (recordLen < 4 || recordLen > 16_384) return { kind: 'invalid' };
  if (buf.length < 5 + recordLen) return { kind: 'incomplete' };
  const b = buf.subarray(5, 5 + recordLen);
  let p = 0;
  const need = (n: number) => p + n <= b.length;
  if (b[0] !== 0x01) return { kind: 'invalid' };
  const hsLen = (b[1]! << 16) | (b[2]! << 8) | b[3]!;
  // A ClientHello split over several records is refused (bounded parsing).
  if (hsLen + 4 > b.length) return { kind: 'invalid' };
  p = 4;
  if (!need(2 + 32 + 1)) return { kind: 'invalid' };
  p += 2 + 32;
  const sid = b[p]!;
  p += 1 + sid;
  if (!need(2)) return { kind: 'invalid' };
  const suites = (b[p]! << 8) | b[p + 1]!;
  p += 2 + suites;
  if (!need(1)) return { kind: 'invalid' };
  const comp = b[p]!;
  p += 1 + comp;
  if (p === hsLen + 4) return { kind: 'hello', sni: null };
  if (!need(2)) return { kind: 'invalid' };
  const extEnd = p + 2 + ((b[p]! << 8) | b[p + 1]!);
  p += 2;
  if (extEnd > b.length) return { kind: 'invalid' };
  let sni: string | null = null;
  let alpn: string[] | undefined;
  while (p + 4 <= extEnd) {
    const type = (b[p]! << 8) | b[p + 1]!;
    const len = (b[p + 2]! << 8) | b[p + 3]!;
    p += 4;
    if (p + len > extEnd) return { kind: 'invalid' };
    if (type === 0) {
      // server_name: list length, then entries of (type, length, name); host_name is type 0.
      if (sni !== null || len < 2) return { kind: 'invalid' };
      let q = p + 2;
      const listEnd = p + 2 + ((b[p]! << 8) | b[p + 1]!);
      if (listEnd > p + len) return { kind: 'invalid' };
      while (q + 3 <= listEnd) {
        const nameType = b[q]!;
        const nameLen = (b[q + 1]! << 8) | b[q + 2]!;
        q += 3;
        if (q + nameLen > listEnd) return { kind: 'invalid' };
        if (nameType === 0) {
          // Two host names in one hello is not something a client sends: refused.
          if (sni !== null) return { kind: 'invalid' };
          sni = Buffer.from(b.subarray(q, q + nameLen)).toString('latin1');
        }
        q += nameLen;
      }
    } else if (type === 16) {
      // application_layer_protocol_negotiation (the secrets interception offers the upstream the same).
      if (alpn !== undefined || len < 2 || ((b[p]! << 8) | b[p + 1]!) !== len - 2) return { kind: 'invalid' };
      alpn = [];
      for (let q = p + 2; q < p + len; ) {
        const n = b[q]!;
        if (n === 0 || q + 1 + n > p + len) return { kind: 'invalid' };
        alpn.push(Buffer.from(b.subarray(q + 1, q + 1 + n)).toString('latin1'));
        q += 1 + n;
      }
    }
    p += len;
  }
  if (p !== extEnd) return { kind: 'invalid' };
  return alpn === undefined ? { kind: 'hello', sni } : { kind: 'hello', sni, alpn };
}
