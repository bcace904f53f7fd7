import { describe, expect, it } from 'vitest';
import { EventBus } from '../../src/core/events/bus.js';

const clock = { now: () => new Date('2026-01-01T00:00:00Z') };

describe('event JSON shape (DESIGN.md §3)', () => {
  it('emits keys in the documented order, whatever order the publisher wrote them in', () => {
    const bus = new EventBus(clock);
    const seen: string[] = [];
    bus.subscribe((e) => seen.push(JSON.stringify(e)));
    bus.publish({ data: { reason: 'requested' }, worker_id: 'local', owner_id: 'alice', sandbox_id: 'sb-1', type: 'sandbox.destroyed' });
    const event = bus.recent()[0];
    const expected = [
      '{"id":1,"type":"sandbox.destroyed","timestamp":"2026-01-01T00:00:00.000Z",',
      '"sandbox_id":"sb-1","owner_id":"alice","worker_id":"local","data":{"reason":"requested"}}',
    ].join('');
    expect(JSON.stringify(event)).toBe(expected);
    expect(seen).toEqual([expected]);
    expect(JSON.stringify(bus.recent()[0])).toBe(expected);
  });

  it('leaves out members that are not set, rather than carrying undefined keys', () => {
    const bus = new EventBus(clock);
    bus.publish({ type: 'quota.deleted', sandbox_id: undefined, owner_id: 'bob', data: { owner: 'bob' } });
    bus.publish({ type: 'sandbox.created' });
    const [first, second] = bus.recent();
    expect(Object.keys(first!)).toEqual(['id', 'type', 'timestamp', 'owner_id', 'data']);
    expect(Object.keys(second!)).toEqual(['id', 'type', 'timestamp']);
  });
});
