/**
 * A single-consumer async queue: producers `push` and `end`, one consumer iterates. It bridges
 * push-style sources (WebSocket messages) to the AsyncIterables the ports take. `return()` from
 * the consumer drops what is left and ends at once, even while a `next()` is waiting.
 */
export class AsyncQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private waiting: ((r: IteratorResult<T, undefined>) => void) | null = null;
  private ended = false;
  private closedByConsumer = false;

  /** `onShift` sees every item the consumer takes (for flow control by the producer). */
  constructor(private readonly opts: { onShift?: (item: T) => void } = {}) {}

  /** Queues an item; false when the queue has ended (the item is dropped). */
  push(item: T): boolean {
    if (this.ended) return false;
    const w = this.waiting;
    if (w) {
      this.waiting = null;
      this.opts.onShift?.(item);
      w({ value: item, done: false });
    } else {
      this.items.push(item);
    }
    return true;
  }

  /** No more items: the consumer sees the end once it has taken what is queued. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    const w = this.waiting;
    this.waiting = null;
    w?.({ value: undefined, done: true });
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** True once the consumer stopped iterating (called `return()`). */
  get isClosed(): boolean {
    return this.closedByConsumer;
  }

  /** Items waiting for the consumer. */
  get length(): number {
    return this.items.length;
  }

  [Symbol.asyncIterator](): AsyncIterator<T, undefined> {
    return {
      next: (): Promise<IteratorResult<T, undefined>> => {
        if (this.items.length > 0) {
          const value = this.items.shift() as T;
          this.opts.onShift?.(value);
          return Promise.resolve({ value, done: false });
        }
        if (this.ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.waiting = resolve;
        });
      },
      return: (): Promise<IteratorResult<T, undefined>> => {
        this.closedByConsumer = true;
        this.items.length = 0;
        this.end();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}
