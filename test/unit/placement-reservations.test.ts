/** Placement's slots for spawns not yet stored (core/scheduler/reservations.ts): never neither the row nor its slot. */
import { describe, expect, it } from 'vitest';
import { PlacementReservations } from '../../src/core/scheduler/reservations.js';

describe('PlacementReservations', () => {
  it('a held slot counts for every placement until its spawn fails', () => {
    const r = new PlacementReservations();
    const a = r.begin();
    const slot = r.hold('w1', 'alice');
    a.end();
    const b = r.begin();
    expect(b.pending('alice').by_worker.get('w1')).toBe(1);
    expect(b.pending('alice').by_worker_for_owner.get('w1')).toBe(1);
    expect(b.pending('bob').by_worker_for_owner.get('w1')).toBeUndefined();
    expect(b.pending(null).by_worker_for_owner.size).toBe(0);
    slot.failed();
    expect(b.pending('alice').by_worker.get('w1')).toBeUndefined();
    b.end();
    expect(r.size).toBe(0);
  });

  it('a stored slot still counts for a read begun before the row was stored, and for none begun after', () => {
    const r = new PlacementReservations();
    const slot = r.hold('w1', null);
    const before = r.begin(); // its count may have missed the row
    slot.stored();
    const after = r.begin(); // its count sees the row
    expect(before.pending(null).by_worker.get('w1')).toBe(1);
    expect(after.pending(null).by_worker.get('w1')).toBeUndefined();
    before.end();
    after.end();
    // No open read can need it any more: dropped.
    expect(r.size).toBe(0);
  });

  it('two placements deciding on counts read at once see each other (the second sees the first one’s slot)', () => {
    const r = new PlacementReservations();
    const a = r.begin();
    const b = r.begin();
    // a decides first and holds; b decides next.
    r.hold('w1', null);
    expect(b.pending(null).by_worker.get('w1')).toBe(1);
    a.end();
    b.end();
    expect(r.size).toBe(1);
  });
});
