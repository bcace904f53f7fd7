import { randomBytes } from 'node:crypto';
import type { Clock, IdSource } from '../../core/ports/index.js';

export const systemClock: Clock = { now: () => new Date() };

const ALPHABET = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** `sb-` + 12 random base-36 characters (62 bits): short, typeable, collision-safe in practice. */
export const randomIds: IdSource = {
  sandboxId() {
    const bytes = randomBytes(12);
    let s = '';
    for (const b of bytes) s += ALPHABET[b % 36];
    return `sb-${s}`;
  },
  randomId(n = 16) {
    return randomBytes(n).toString('hex');
  },
};
