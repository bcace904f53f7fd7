import type { ServerResponse } from 'node:http';
import type { ByteBudget } from '../../core/sandboxes/exec.js';
import type { InflightBudget } from './inflight.js';

/**
 * Copies of buffered output alive at once while the answer is built: the chunks, their join, the
 * text of each stream and the serialized JSON body.
 */
const OUTPUT_COPIES = 4;

interface Holder {
  seq: number;
  held: number;
  done: boolean;
}

/** Buffered execs holding output of one budget, in start order, and the waits for room. */
class OutputHolders {
  readonly all = new Set<Holder>();
  private nextSeq = 0;
  private wakers: Array<() => void> = [];

  add(): Holder {
    const h: Holder = { seq: this.nextSeq++, held: 0, done: false };
    this.all.add(h);
    return h;
  }

  /** Whether no exec that started after `h` still holds output. */
  newest(h: Holder): boolean {
    for (const o of this.all) if (o.seq > h.seq) return false;
    return true;
  }

  /** Resolves at the next change: bytes given back or a holder gone. */
  changed(): Promise<void> {
    return new Promise((resolve) => this.wakers.push(resolve));
  }

  wake(): void {
    const wakers = this.wakers;
    this.wakers = [];
    for (const w of wakers) w();
  }
}

const groups = new WeakMap<InflightBudget, OutputHolders>();

/**
 * The in-flight budget as one buffered exec sees it: each byte of output held costs its copies,
 * and everything is given back once the answer is sent (or the client is gone), not when the
 * command ends. When the budget is full, the newest buffered exec gives way (503, its command
 * killed, its bytes back) while older ones wait for room — woken when an answer gives its bytes
 * back, never by polling — so the oldest always finish.
 */
export function outputBudget(res: ServerResponse, budget: InflightBudget | undefined): ByteBudget | undefined {
  if (!budget) return undefined;
  let group = groups.get(budget);
  if (!group) {
    const created = new OutputHolders();
    budget.onGive(() => created.wake());
    groups.set(budget, (group = created));
  }
  const g = group;
  const me = g.add();
  const release = () => {
    if (me.done) return;
    me.done = true;
    g.all.delete(me);
    budget.give(me.held);
    me.held = 0;
    g.wake();
  };
  res.once('close', release);
  const tryTake = (m: number) => {
    if (me.done || !budget.take(m)) return me.done;
    me.held += m;
    return true;
  };
  return {
    take(n) {
      const m = n * OUTPUT_COPIES;
      if (tryTake(m)) return true;
      return (async () => {
        for (;;) {
          if (g.newest(me)) {
            release();
            return false;
          }
          // Every change that can make room or make this exec the newest wakes it: bytes given
          // back to the budget, a holder gone. The second is only a backstop.
          await Promise.race([g.changed(), new Promise((r) => setTimeout(r, 1_000).unref())]);
          if (tryTake(m)) return true;
        }
      })();
    },
    give() {
      // given back on close
    },
  };
}
