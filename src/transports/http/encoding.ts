import { badRequest } from '../../core/errors.js';

const NOT_BASE64 = /[^A-Za-z0-9+/=]/;

/**
 * The language of /^[A-Za-z0-9+/]*={0,2}$/ (alphabet, then at most two `=` at the very end), tested
 * by a search for a stray character plus one indexOf: an anchored match with a trailing optional
 * group runs several times slower over a multi-megabyte string.
 */
function isBase64(s: string): boolean {
  if (NOT_BASE64.test(s)) return false;
  const pad = s.indexOf('=');
  return pad === -1 || pad === s.length - 1 || (pad === s.length - 2 && s.charCodeAt(s.length - 1) === 0x3d);
}

/**
 * Text fields that carry bytes (file content, exec stdin): utf8 as is, or base64 (whitespace such
 * as line wrapping allowed); malformed base64 is a bad_request naming `field`.
 */
export function decodeText(data: string, encoding: 'utf8' | 'base64' | undefined, field: string): Buffer {
  if (encoding !== 'base64') return Buffer.from(data, 'utf8');
  // Content without whitespace skips the copy.
  const clean = isBase64(data) ? data : data.replace(/\s+/g, '');
  if (!isBase64(clean) || clean.length % 4 === 1) throw badRequest(`${field} is not valid base64`);
  return Buffer.from(clean, 'base64');
}
