/**
 * List cursors (DESIGN.md §13): the position of the last sandbox of a page, `(created_at, id)`,
 * opaque to clients and signed with an installation secret kept in the store, so any replica
 * accepts it and nobody can forge or alter one. The sandbox itself may be gone by the next call;
 * the position still continues the walk.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { badRequest } from '../errors.js';

export interface ListPosition {
  created_at: string;
  id: string;
}

const MAC_BYTES = 16;

function mac(secret: string, payload: string): Buffer {
  return createHmac('sha256', secret).update(`list-cursor:${payload}`).digest().subarray(0, MAC_BYTES);
}

export function encodeCursor(secret: string, pos: ListPosition): string {
  const payload = Buffer.from(JSON.stringify([pos.created_at, pos.id])).toString('base64url');
  return `${payload}.${mac(secret, payload).toString('base64url')}`;
}

/** The position a cursor names; `bad_request` for anything malformed, altered or signed elsewhere. */
export function decodeCursor(secret: string, cursor: string): ListPosition {
  const bad = () => badRequest('after is not a cursor this server issued (take it from the Link header of the previous page)');
  const dot = cursor.indexOf('.');
  if (dot <= 0 || cursor.length > 1024) throw bad();
  const payload = cursor.slice(0, dot);
  const given = Buffer.from(cursor.slice(dot + 1), 'base64url');
  const want = mac(secret, payload);
  if (given.length !== want.length || !timingSafeEqual(given, want)) throw bad();
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (!Array.isArray(value) || value.length !== 2 || typeof value[0] !== 'string' || typeof value[1] !== 'string') throw bad();
  return { created_at: value[0], id: value[1] };
}
