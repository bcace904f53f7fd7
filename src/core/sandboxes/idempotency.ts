/**
 * Idempotent spawns (DESIGN.md §10): `Idempotency-Key` on a spawn. The same key from the same owner
 * within 24 h answers the first result again without spawning; with a different request it is a
 * conflict; a retry while the first is still spawning waits for it. Keys live in the store, so
 * they hold across restarts and replicas.
 */
import { createHash } from 'node:crypto';
import { badRequest, conflict, notFound, SbxError } from '../errors.js';
import type { Clock, IdempotencyStore, SandboxRecord } from '../ports/index.js';

/** How long a key answers with its first result. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** A claim whose spawn never finished (its replica died) is abandoned after this long. */
const ABANDONED_MS = 15 * 60_000;
/** How long a retry waits for the first request to finish. */
const WAIT_MS = 10 * 60_000;
const KEY = /^[\x21-\x7e](?:[\x20-\x7e]{0,126}[\x21-\x7e])?$/;

/** The header's value checked: 1–128 printable ASCII characters, no blank at either end. */
export function parseIdempotencyKey(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const v = Array.isArray(raw) ? raw[0] : raw;
  if (v === undefined || !KEY.test(v))
    throw badRequest('Idempotency-Key must be 1 to 128 printable ASCII characters, without leading or trailing blanks');
  return v;
}

/** A stable hash of what was asked: the route and the body with its keys in sorted order. */
export function requestHash(route: string, body: unknown): string {
  const canon = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(canon);
    if (v && typeof v === 'object')
      return Object.fromEntries(
        Object.keys(v)
          .sort()
          .map((k) => [k, canon((v as Record<string, unknown>)[k])]),
      );
    return v;
  };
  return createHash('sha256')
    .update(route)
    .update('\0')
    .update(JSON.stringify(canon(body ?? {})))
    .digest('hex');
}

export interface IdempotentResult {
  rec: SandboxRecord;
  /** True when this answers an earlier request with the same key. */
  replayed: boolean;
}

export class Idempotency {
  constructor(
    private readonly store: IdempotencyStore,
    private readonly clock: Clock,
    private readonly load: (id: string) => Promise<SandboxRecord | null>,
  ) {}

  /**
   * Runs `spawn` once per (owner, key): the first caller spawns; later ones with the same request
   * get its sandbox; a different request → 409. The signal ends a wait (client gone).
   */
  async run(
    owner: string | null,
    key: string,
    hash: string,
    spawn: () => Promise<SandboxRecord>,
    signal?: AbortSignal,
  ): Promise<IdempotentResult> {
    const { value, replayed } = await this.runFor(owner, key, hash, spawn, (rec) => rec.id, this.load, signal);
    return { rec: value, replayed };
  }

  /**
   * `run` for any result that one sandbox id names (a fork's answer: its first fork, DESIGN.md §16):
   * `idOf` gives the id kept with the key, `load` the result again from it.
   */
  async runFor<T>(
    owner: string | null,
    key: string,
    hash: string,
    make: () => Promise<T>,
    idOf: (value: T) => string,
    load: (id: string) => Promise<T | null>,
    signal?: AbortSignal,
  ): Promise<{ value: T; replayed: boolean }> {
    const ownerKey = owner ?? '';
    const deadline = performance.now() + WAIT_MS;
    let pause = 50;
    for (;;) {
      const createdAt = this.clock.now().toISOString();
      if (await this.store.claimIdempotency({ owner_key: ownerKey, key, request_hash: hash, created_at: createdAt })) {
        let value: T;
        try {
          value = await make();
        } catch (err) {
          // Nothing was made: a retry with this key spawns afresh.
          await this.store.dropIdempotency(ownerKey, key, createdAt, true).catch(() => false);
          throw err;
        }
        await this.store.completeIdempotency(ownerKey, key, createdAt, idOf(value));
        return { value, replayed: false };
      }
      const row = await this.store.getIdempotency(ownerKey, key);
      if (!row) continue; // the first attempt failed and let go of the key: try to claim it
      const age = this.clock.now().getTime() - Date.parse(row.created_at);
      if (age >= IDEMPOTENCY_TTL_MS || (row.sandbox_id === null && age >= ABANDONED_MS)) {
        await this.store.dropIdempotency(ownerKey, key, row.created_at, false);
        continue;
      }
      if (row.request_hash !== hash) throw conflict(`Idempotency-Key "${key}" was already used with a different request`);
      if (row.sandbox_id !== null) {
        const value = await load(row.sandbox_id);
        if (value === null) throw notFound(`sandbox ${row.sandbox_id} of Idempotency-Key "${key}" no longer exists`);
        return { value, replayed: true };
      }
      // The first request is still spawning: wait for it.
      if (signal?.aborted)
        throw new SbxError('unavailable', 'request cancelled while waiting for the first request with this Idempotency-Key');
      if (performance.now() > deadline)
        throw new SbxError('unavailable', `the first request with Idempotency-Key "${key}" is still spawning; try again later`);
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(500, pause * 2);
    }
  }

  /** Deletes keys past their 24 h (the reaper's chore). */
  prune(): Promise<number> {
    return this.store.pruneIdempotency(new Date(this.clock.now().getTime() - IDEMPOTENCY_TTL_MS).toISOString());
  }
}
