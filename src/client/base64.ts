/** Base64 of bytes without Buffer, so shared client code runs in browsers too (btoa is global in Node 16+). */
export function bytesToBase64(bytes: Uint8Array): string {
  let bin = '';
  // fromCharCode over slices: one call per byte is slow, one call for all overflows the stack.
  for (let i = 0; i < bytes.byteLength; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}

/** Bytes of base64 text without Buffer (atob is global in Node 16+ and browsers). */
export function base64ToBytes(text: string): Uint8Array {
  const bin = atob(text);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
